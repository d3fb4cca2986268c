package cellcore

import (
	"sync"
	"sync/atomic"
	"time"
)

// Sequencers (seed 004): the order in which pending groups are tried.
//
// kube-scheduler has one queue, with one QueueSort, for the whole profile.
// A VC's own order is honoured inside it by giving every pending group a key
// of the same shape whatever its VC's sequencer (SequenceKey), compared
// lexicographically: a total order, so the queue's heap stays consistent,
// and inside each VC it is exactly that VC's order:
//
//	priority (higher first), then Share (lower first), then Age (lower first)
//
//   - PriorityFIFO: Share 0, Age = creation time: oldest first.
//   - PriorityLIFO: Share 0, Age = minus the creation time: newest first.
//   - DRF: Share = the namespace's dominant share of the VC (leaf cells its
//     groups hold / leaf cells the VC owns), Age = creation time: the
//     namespace using least of its VC first, FIFO inside a namespace.
//   - Opportunistic groups (priority -1), from every VC alike: Share = the
//     leaf cells their VC's opportunistic groups hold now, so that one
//     tenant's flood of opportunistic jobs cannot starve the others'
//     idle-capacity use; Age = creation time.
//
// Across VCs of different sequencers, groups of equal priority interleave by
// these keys (a LIFO VC's groups come before a FIFO VC's, which is harmless:
// VCs do not compete for guaranteed cells, only for the scheduler's time).
// Shares change as groups come and go: a queued group keeps its place until
// the queue compares it again, so DRF's order is that of the shares at the
// last comparison.
//
// The inputs are read without the core's lock (the queue compares often, and
// must not wait for a placement): every group state change updates them.

// SequenceKey is a pending group's place in the queue.
type SequenceKey struct {
	Priority int32
	Share    float64
	Age      int64
}

// SequenceLess orders two keys: higher priority first, then lower share,
// then lower age.
func SequenceLess(a, b SequenceKey) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if a.Share != b.Share {
		return a.Share < b.Share
	}
	return a.Age < b.Age
}

// sequenceView is what SequenceKeyOf reads, kept up to date under the
// core's lock and read without it.
type sequenceView struct {
	vcs sync.Map // VC name -> *vcSequence
	ns  sync.Map // nsKey -> *atomic.Int64: leaf cells the namespace's groups hold of the VC
	opp sync.Map // VC name -> *atomic.Int64: leaf cells its opportunistic groups hold
}

type vcSequence struct {
	sequencer atomic.Value // Sequencer
	leaves    atomic.Int64 // the VC's leaf cells
}

func (v *sequenceView) setVC(name string, s Sequencer, leaves int64) {
	e, _ := v.vcs.LoadOrStore(name, &vcSequence{})
	vs := e.(*vcSequence)
	vs.sequencer.Store(s)
	vs.leaves.Store(leaves)
}

func counter(m *sync.Map, key any) *atomic.Int64 {
	if c, ok := m.Load(key); ok {
		return c.(*atomic.Int64)
	}
	c, _ := m.LoadOrStore(key, new(atomic.Int64))
	return c.(*atomic.Int64)
}

// trackSequence keeps the view's holdings when a group starts or stops
// holding cells.
func (k *Core) trackSequence(g *AffinityGroup, from, to AGState) {
	if holding(from) == holding(to) {
		return
	}
	d := int64(g.totalLeaves())
	if !holding(to) {
		d = -d
	}
	if g.spec.Namespace != "" {
		counter(&k.seqView.ns, nsKey{g.spec.VirtualCluster, g.spec.Namespace}).Add(d)
	}
	if g.spec.Priority < 0 {
		counter(&k.seqView.opp, g.spec.VirtualCluster).Add(d)
	}
}

// SequenceKeyOf is the queue key of a pending group of a VC and namespace,
// created at the given time. Safe to call from the scheduling queue: it
// takes no lock.
func (k *Core) SequenceKeyOf(vc, namespace string, priority int32, created time.Time) SequenceKey {
	key := SequenceKey{Priority: priority, Age: created.UnixNano()}
	if priority < 0 {
		if c, ok := k.seqView.opp.Load(vc); ok {
			key.Share = float64(c.(*atomic.Int64).Load())
		}
		return key
	}
	e, ok := k.seqView.vcs.Load(vc)
	if !ok {
		return key
	}
	vs := e.(*vcSequence)
	s, _ := vs.sequencer.Load().(Sequencer)
	switch s {
	case SequencerPriorityLIFO:
		key.Age = -key.Age
	case SequencerDRF:
		if c, ok := k.seqView.ns.Load(nsKey{vc, namespace}); ok {
			if total := vs.leaves.Load(); total > 0 {
				key.Share = float64(c.(*atomic.Int64).Load()) / float64(total)
			}
		}
	}
	return key
}
