package cellcore

import (
	"fmt"
	"math/rand"
	"runtime"
	"sort"
	"testing"
	"time"
)

// benchConfig is nodes 8-GPU nodes in a RACK(8 nodes)/NODE/SOCKET/SWITCH/GPU
// hierarchy.
func benchConfig(nodes int) Config {
	return clusterConfig(nodes/8, 8, 0)
}

// benchVCs reserves 90% of the cluster: two VCs of racks, two of nodes.
func benchVCs(nodes int) []VirtualClusterSpec {
	racks := nodes / 8
	return []VirtualClusterSpec{
		vcSpec("vc-a", "V100-RACK", racks*3/10),
		vcSpec("vc-b", "V100-NODE", nodes*3/10),
		vcSpec("vc-c", "V100-RACK", racks*2/10),
		vcSpec("vc-d", "V100-NODE", nodes/10),
	}
}

// halfFullCore builds a cluster and fills every VC to half its leaf cells
// with a mix of guaranteed gangs, then the unreserved cells to half with
// opportunistic ones, as a scheduler that has run for a while would be.
func halfFullCore(b *testing.B, nodes int) *Core {
	b.Helper()
	k := newHealthyCore(b, benchConfig(nodes))
	fillHalf(b, k, benchVCs(nodes), int32(nodes*8), [][2]int32{{1, 1}, {1, 2}, {1, 4}, {1, 8}, {2, 8}, {4, 8}, {2, 1}, {4, 2}}, "")
	return k
}

// fillHalf sets the VCs on k and fills each to half its leaf cells with
// gangs of the shapes (pods x leaf cells, drawn with a fixed seed; gangs of
// more than one pod constrained to within, if set), then the cells no VC
// reserves (of the cluster's total leaves) to half with opportunistic ones.
func fillHalf(b *testing.B, k *Core, vcs []VirtualClusterSpec, total int32, shapes [][2]int32, within string) {
	b.Helper()
	for _, v := range vcs {
		if _, err := k.SetVirtualCluster(v); err != nil {
			b.Fatal(err)
		}
	}
	r := rand.New(rand.NewSource(42))
	n := 0
	fill := func(vc string, prio int32, target int32) {
		var used int32
		for tries := 0; used < target && tries < int(total); tries++ {
			sh := shapes[r.Intn(len(shapes))]
			n++
			s := ag(fmt.Sprintf("fill-%d", n), vc, prio, sh[0], sh[1])
			if sh[0] > 1 {
				s.WithinTopologyKey = within
			}
			if prio >= 0 {
				s.Priority = int32(r.Intn(3))
			}
			d, err := k.Schedule(s)
			if err != nil {
				b.Fatal(err)
			}
			if d.Kind == Placed {
				bindAll(b, k, d)
				used += sh[0] * sh[1]
			} else if _, err := k.DeleteAffinityGroup(s.Name); err != nil {
				b.Fatal(err)
			}
		}
	}
	var reserved int32
	for _, v := range vcs {
		var leaves int32
		for _, c := range v.VirtualCells {
			ch, l, err := k.resolveCellType(c.CellType)
			if err != nil {
				b.Fatal(err)
			}
			leaves += c.CellNumber * ch.leafCount[l]
		}
		reserved += leaves
		fill(v.Name, 0, leaves/2)
	}
	fill(vcs[0].Name, -1, (total-reserved)/2)
}

// BenchmarkScheduleAffinityGroup measures one placement decision (AG e0,
// with its lazy bindings) at half occupancy, then deletes the group (AG e3)
// so the cluster stays half full. ns/op and allocs/op cover both; the
// p50-ns and p99-ns metrics are the placement (Schedule) alone.
func BenchmarkScheduleAffinityGroup(b *testing.B) {
	for _, nodes := range []int{1000, 10000, 50000} {
		k := halfFullCore(b, nodes)
		vcs := []string{"vc-a", "vc-b", "vc-c", "vc-d"}
		for _, sh := range [][2]int32{{1, 1}, {1, 8}, {4, 8}, {8, 8}} {
			b.Run(fmt.Sprintf("nodes=%d/shape=%dx%d", nodes, sh[0], sh[1]), func(b *testing.B) {
				benchPlacements(b, k, func(i int) AffinityGroupSpec { return ag("bench", vcs[i%len(vcs)], 3, sh[0], sh[1]) })
			})
		}
	}
}

// benchPlacements schedules spec(i) (a group named "bench") and deletes it
// again, b.N times; p50-ns and p99-ns are the Schedule calls alone.
func benchPlacements(b *testing.B, k *Core, spec func(i int) AffinityGroupSpec) {
	lat := make([]time.Duration, 0, b.N)
	placed := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := spec(i)
		t0 := time.Now()
		d, err := k.Schedule(s)
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		if d.Kind == Placed {
			placed++
		}
		if _, err := k.DeleteAffinityGroup(s.Name); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportLatency(b, lat)
	b.ReportMetric(float64(placed)/float64(b.N), "placed/op")
}

// reportLatency reports the median and 99th percentile of the timed calls.
func reportLatency(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkBuildCluster builds the cell model and marks every node healthy,
// as a restarted scheduler must before it can schedule. bytes/cell is the
// heap the model holds per physical cell (all levels).
func BenchmarkBuildCluster(b *testing.B) {
	for _, nodes := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			cfg := benchConfig(nodes)
			names := make([]string, 0, nodes)
			for _, r := range cfg.PhysicalCells {
				for _, n := range r.CellChildren {
					names = append(names, n.CellAddress)
				}
			}
			var perCell float64
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var before, after runtime.MemStats
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&before)
				b.StartTimer()
				k, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				for _, n := range names {
					if err := k.SetNodeHealth(n, NodeHealthy); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				perCell = float64(after.HeapAlloc-before.HeapAlloc) / float64(k.CellCount())
				runtime.KeepAlive(k)
				b.StartTimer()
			}
			b.ReportMetric(perCell, "bytes/cell")
		})
	}
}

// BenchmarkPreemptAffinityGroup measures the preemption search: every rack
// of one VC is full of priority-1 gangs of 4 x 8 GPUs (two a rack), and a
// priority-100 gang of 4 x 8 GPUs must preempt one (AG e1); deleting it
// cancels the preemption (x2) so the cluster stays full.
func BenchmarkPreemptAffinityGroup(b *testing.B) {
	benchPreemption(b, []int{1000, 10000, 50000}, false)
}

// BenchmarkPreemptFullScan is BenchmarkPreemptAffinityGroup without the
// search's early stop (preemptFloor): the full scan it replaced, for
// scale.
func BenchmarkPreemptFullScan(b *testing.B) {
	benchPreemption(b, []int{1000, 10000}, true)
}

func benchPreemption(b *testing.B, sizes []int, floorOff bool) {
	verify := verifyPreemptFloor
	verifyPreemptFloor = false // TestMain's cross-check would run the full scan too
	preemptFloorOff = floorOff
	defer func() { verifyPreemptFloor, preemptFloorOff = verify, false }()
	for _, nodes := range sizes {
		k := newHealthyCore(b, benchConfig(nodes))
		if _, err := k.SetVirtualCluster(vcSpec("vc", "V100-RACK", nodes/8)); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < nodes/4; i++ {
			d, err := k.Schedule(ag(fmt.Sprintf("low-%d", i), "vc", 1, 4, 8))
			if err != nil || d.Kind != Placed {
				b.Fatalf("filling: %v %v", err, d.Reason)
			}
			bindAll(b, k, d)
		}
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				d, err := k.Schedule(ag("high", "vc", 100, 4, 8))
				lat = append(lat, time.Since(t0))
				if err != nil || d.Kind != Preempt || len(d.Victims) != 1 {
					b.Fatalf("want a preemption of one gang: %v %+v", err, d)
				}
				if _, err := k.DeleteAffinityGroup("high"); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			reportLatency(b, lat)
		})
	}
}
