package cellcore

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkSchedulePolicies: one placement decision per VC selector and
// sequencer at 10k nodes, half full, every VC set to the policy (Pack and
// PriorityFIFO are the baseline: the same as BenchmarkScheduleAffinityGroup);
// groups carry a namespace, and the Limits run gives it limits it stays
// under. p50-ns is the placement alone. SequenceKey measures the queue key.
func BenchmarkSchedulePolicies(b *testing.B) {
	const nodes = 10000
	k := halfFullCore(b, nodes)
	base := benchVCs(nodes)
	limit := int32(1 << 20)
	for _, pol := range []struct {
		name string
		set  func(*VirtualClusterSpec)
	}{
		{"Pack", func(*VirtualClusterSpec) {}},
		{"Spread", func(s *VirtualClusterSpec) { s.Selector = SelectorSpread }},
		{"RoundRobin", func(s *VirtualClusterSpec) { s.Selector = SelectorRoundRobin }},
		{"PriorityLIFO", func(s *VirtualClusterSpec) { s.Sequencer = SequencerPriorityLIFO }},
		{"DRF", func(s *VirtualClusterSpec) { s.Sequencer = SequencerDRF }},
		{"Limits", func(s *VirtualClusterSpec) {
			s.Limits = map[string]NamespaceLimits{AllNamespaces: {MaxLeafCells: &limit, MaxRunningGroups: &limit, MaxPriority: ptrTo(int32(1000))}}
		}},
	} {
		for _, v := range base {
			v.Sequencer, v.Selector, v.Limits = "", "", nil
			pol.set(&v)
			if _, err := k.SetVirtualCluster(v); err != nil {
				b.Fatal(err)
			}
		}
		for _, sh := range [][2]int32{{1, 1}, {2, 1}, {1, 8}, {4, 8}} {
			b.Run(fmt.Sprintf("policy=%s/shape=%dx%d", pol.name, sh[0], sh[1]), func(b *testing.B) {
				benchPlacements(b, k, func(i int) AffinityGroupSpec { return nsAG("bench", base[i%len(base)].Name, "ns", 3, sh[0], sh[1]) })
			})
		}
		b.Run(fmt.Sprintf("policy=%s/SequenceKey", pol.name), func(b *testing.B) {
			t0 := time.Unix(1000, 0)
			for i := 0; i < b.N; i++ {
				_ = k.SequenceKeyOf(base[i%len(base)].Name, "ns", 3, t0)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
