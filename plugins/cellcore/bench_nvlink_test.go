package cellcore

import (
	"fmt"
	"testing"
)

// NVLink domains at scale (issue 45): BenchmarkScheduleNVL72 is
// BenchmarkScheduleAffinityGroup's decision on a cluster of GB200 NVL72
// domains instead of 8-GPU racks, to be run side by side with it
// (docs/perf.md, "NVLink domains"):
//
//	go test ./plugins/cellcore -run '^$' -count 6 \
//	  -bench 'ScheduleAffinityGroup/nodes=10000/|ScheduleNVL72/'

// nvl72Domains is 139 domains: 2,502 trays, 10,008 GPUs.
const nvl72Domains = 139

// nvl72BenchVCs reserves 90% of the domains' GPUs: whole domains, halves,
// and single trays (two VCs).
func nvl72BenchVCs(domains int) []VirtualClusterSpec {
	trays := domains * 18
	return []VirtualClusterSpec{
		vcSpec("vc-a", "GB200-NVL72", domains*4/10),
		vcSpec("vc-b", "GB200-NVL72.GB200-NVL36", domains*2*3/10),
		vcSpec("vc-c", "GB200-NODE", trays*2/10),
		vcSpec("vc-d", "GB200-NODE", trays/10),
	}
}

// nvl72HalfFull fills every VC to half its GPUs with gangs of the shapes
// NVL72 users run (one pod of 1 or 4 GPUs, 2/4/9/18 pods of 4 within one
// domain), then the unreserved GPUs to half with opportunistic ones
// (fillHalf, as halfFullCore does on racks).
func nvl72HalfFull(b *testing.B, domains int) *Core {
	b.Helper()
	k := newHealthyCore(b, nvl72Config(domains, 0))
	fillHalf(b, k, nvl72BenchVCs(domains), int32(domains*72), [][2]int32{{1, 1}, {1, 1}, {1, 4}, {2, 4}, {4, 4}, {9, 4}, {18, 4}}, cliqueKey)
	return k
}

// BenchmarkScheduleNVL72 measures one placement decision at half
// occupancy of 10,008 GPUs in NVL72 domains, then deletes the group, as
// BenchmarkScheduleAffinityGroup does on 8-GPU racks: p50-ns and p99-ns
// are the Schedule call alone; gangs of more than one pod ask for one
// domain (withinTopologyKey nvidia.com/gpu.clique).
func BenchmarkScheduleNVL72(b *testing.B) {
	k := nvl72HalfFull(b, nvl72Domains)
	vcs := []string{"vc-a", "vc-b", "vc-c", "vc-d"}
	for _, sh := range [][2]int32{{1, 1}, {2, 4}, {9, 4}, {18, 4}} {
		b.Run(fmt.Sprintf("gpus=%d/shape=%dx%d", nvl72Domains*72, sh[0], sh[1]), func(b *testing.B) {
			benchPlacements(b, k, func(i int) AffinityGroupSpec {
				s := ag("bench", vcs[i%len(vcs)], 3, sh[0], sh[1])
				if sh[0] > 1 {
					s.WithinTopologyKey = cliqueKey
				}
				return s
			})
		})
	}
}
