package cellcore

import (
	"fmt"
	"testing"
)

// BenchmarkScheduleWithin is BenchmarkScheduleAffinityGroup's workload
// with topology constraints (within.go): the same half-full cluster, its
// racks and nodes named by keys, gangs asking for one rack or one node.
// VCs vc-a and vc-c reserve racks (the capped whole-group search); vc-b
// and vc-d reserve nodes, so a gang of several nodes within a rack takes
// the span inside one rack (its bound nodes grouped by rack, binding more
// of its nodes there). Not in hack/bench-core-compare.sh's files: older
// cores lack the feature.
func BenchmarkScheduleWithin(b *testing.B) {
	for _, nodes := range []int{1000, 10000} {
		k := halfFullCore(b, nodes)
		// The keys, set on the built chain (halfFullCore's configuration
		// is the shared benchmark one): rack and node levels.
		ch := k.chains["V100-RACK"]
		ch.levelKey[ch.top], ch.levelKey[ch.nodeLevel] = rackKey, hostKey
		for _, tc := range []struct {
			vcs   []string
			key   string
			shape [2]int32
		}{
			{[]string{"vc-a", "vc-c"}, hostKey, [2]int32{2, 4}},
			{[]string{"vc-a", "vc-c"}, rackKey, [2]int32{4, 8}},
			{[]string{"vc-b", "vc-d"}, rackKey, [2]int32{2, 8}},
			{[]string{"vc-b", "vc-d"}, rackKey, [2]int32{4, 8}},
		} {
			name := fmt.Sprintf("nodes=%d/vcs=%s/within=%s/shape=%dx%d", nodes, tc.vcs[0][3:]+tc.vcs[1][3:], tc.key[len(tc.key)-4:], tc.shape[0], tc.shape[1])
			b.Run(name, func(b *testing.B) {
				benchPlacements(b, k, func(i int) AffinityGroupSpec {
					return within(ag("bench", tc.vcs[i%2], 3, tc.shape[0], tc.shape[1]), tc.key)
				})
			})
		}
	}
}
