package virtualclusters

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/statuswriter"
)

// Run writes VC statuses in the background until ctx ends; the scheduling
// path never waits on it. A change is written promptly (statuswriter.Settle
// after it is announced), yet each VC's status at most once per interval:
// changes that follow a write within the interval are written together
// when it ends. A pass every interval also catches a change nobody
// announced. (It used to write only on that tick, so a status lagged up to
// a whole interval behind: 5 s in the shipped configurations.)
func (r *Registry) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	statuswriter.Run(ctx, r.every, r.kick, func(now time.Time, _ bool) time.Time {
		return r.writeStatuses(ctx, logger, now)
	})
}

// writeStatuses writes the statuses that changed, but for VCs whose status
// was written less than an interval ago: it returns when the first of those
// may be written (zero if none waits).
func (r *Registry) writeStatuses(ctx context.Context, logger klog.Logger, now time.Time) time.Time {
	if !r.recovered() {
		// Not leading yet (or not recovered): this replica's view is
		// empty, and the leader writes the statuses.
		return time.Time{}
	}
	r.mu.Lock()
	entries := make([]*entry, 0, len(r.vcs))
	objs := make([]*hv1.VirtualCluster, 0, len(r.vcs))
	rejected := make([]string, 0, len(r.vcs))
	last := make([]time.Time, 0, len(r.vcs))
	for _, e := range r.vcs {
		entries = append(entries, e)
		objs = append(objs, e.obj)
		why := e.rejected
		if why == "" {
			why = e.physical
		}
		rejected = append(rejected, why)
		last = append(last, e.lastWrite)
	}
	r.mu.Unlock()
	var next time.Time
	for i, vc := range objs {
		st := r.vcStatus(vc, rejected[i], now)
		if statusEqual(vc.Status, st) {
			continue
		}
		if due := last[i].Add(r.every); now.Before(due) {
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		nextObj := vc.DeepCopy()
		nextObj.Status = st
		updated, err := r.client.HiveschedV1alpha1().VirtualClusters().UpdateStatus(ctx, nextObj, metav1.UpdateOptions{})
		if err != nil {
			logger.V(2).Info("writing virtual cluster status", "virtualCluster", vc.Name, "err", err)
			continue // the next pass tries again
		}
		r.mu.Lock()
		entries[i].lastWrite = now
		if entries[i] == r.vcs[vc.Name] && entries[i].obj.ResourceVersion == vc.ResourceVersion {
			entries[i].obj = updated
		}
		r.mu.Unlock()
	}
	return next
}

// statusEqual compares statuses but for condition timestamps.
func statusEqual(a, b hv1.VirtualClusterStatus) bool {
	return statuswriter.Equal(&a, &b, func(s *hv1.VirtualClusterStatus) []metav1.Condition { return s.Conditions })
}

// vcStatus builds a VC's status from the core's counters (at now).
func (r *Registry) vcStatus(vc *hv1.VirtualCluster, rejected string, now time.Time) hv1.VirtualClusterStatus {
	st := hv1.VirtualClusterStatus{ObservedGeneration: vc.Generation, Conditions: append([]metav1.Condition(nil), vc.Status.Conditions...)}
	state := vc.Spec.State
	if state == "" {
		state = hv1.VirtualClusterActive
	}
	st.CellsSummary = cellsSummary(vc.Spec)
	if rejected != "" {
		st.State = hv1.VirtualClusterRejected
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: hv1.ConditionRejected, Status: metav1.ConditionTrue, Reason: "DoesNotFit", Message: rejected, ObservedGeneration: vc.Generation})
		apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: hv1.ConditionAdmitted, Status: metav1.ConditionFalse, Reason: "Rejected", Message: rejected, ObservedGeneration: vc.Generation})
		return st
	}
	st.State = state
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: hv1.ConditionRejected, Status: metav1.ConditionFalse, Reason: "Fits", Message: "the physical cluster hosts the virtual cells", ObservedGeneration: vc.Generation})
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: hv1.ConditionAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", Message: "the virtual cells are part of the cell model", ObservedGeneration: vc.Generation})
	cs, ok := r.core.VirtualClusterStatus(vc.Name)
	if !ok {
		return st
	}
	for _, c := range cs.Cells {
		name := c.CellType // a top-level type is its chain: V100-RACK, not V100-RACK.V100-RACK
		if c.Chain != c.CellType {
			name = c.Chain + "." + c.CellType
		}
		st.Cells = append(st.Cells, hv1.CellTypeStatus{CellType: name, Level: int32(c.Level), TotalCells: c.Total,
			BoundCells: c.Bound, BadCells: c.Bad, UsedLeafCells: c.UsedLeafCells, FreeLeafCells: c.FreeLeafCells})
		st.TotalLeafCells += c.LeafCells
		st.UsedLeafCells += c.UsedLeafCells
		st.FreeLeafCells += c.FreeLeafCells
	}
	for _, c := range cs.PinnedCells {
		bad := int32(0)
		if c.BadLeafCells > 0 {
			bad = 1
		}
		st.Cells = append(st.Cells, hv1.CellTypeStatus{CellType: "pinned:" + c.PinnedCellID, TotalCells: 1, BoundCells: 1, BadCells: bad,
			UsedLeafCells: c.UsedLeafCells, FreeLeafCells: c.FreeLeafCells})
		st.TotalLeafCells += c.LeafCells
		st.UsedLeafCells += c.UsedLeafCells
		st.FreeLeafCells += c.FreeLeafCells
	}
	st.OpportunisticGroups = int32(cs.OpportunisticGroups)
	st.DowngradedGroups = int32(cs.DowngradedGroups)
	st.OpportunisticLeafCells = cs.OpportunisticLeafCells
	st.LostLeafCells, st.ForeignLeafCells = cs.LostLeafCells, cs.ForeignLeafCells
	// The cells neither used nor free, named so that the columns add up.
	var use LeafUse
	if b := LeafBreakdown(cs, LeafUse{}); b.Unavailable > 0 {
		use = r.leafUse(vc.Name, now)
	}
	b := LeafBreakdown(cs, use)
	st.LentLeafCells, st.UnavailableLeafCells = b.Lent, b.Unavailable
	apimeta.SetStatusCondition(&st.Conditions, r.cellsLostCondition(vc, cs))
	sort.Slice(st.Cells, func(i, j int) bool { return st.Cells[i].CellType < st.Cells[j].CellType })
	st.AffinityGroups = hv1.AffinityGroupCounts{
		Pending: int32(cs.AffinityGroups[cellcore.AGPending]), Preempting: int32(cs.AffinityGroups[cellcore.AGPreempting]),
		Allocated: int32(cs.AffinityGroups[cellcore.AGAllocated]), BeingPreempted: int32(cs.AffinityGroups[cellcore.AGBeingPreempted]),
	}
	return st
}

// cellsSummary is the CELLS column: "2xV100-NODE,pinned:rack1-node3". A long
// list of pinned cells is cut after the first two ("pinned:a,b,+3").
func cellsSummary(spec hv1.VirtualClusterSpec) string {
	var parts []string
	for _, c := range spec.VirtualCells {
		if c.CellNumber > 0 {
			parts = append(parts, fmt.Sprintf("%dx%s", c.CellNumber, c.CellType))
		}
	}
	if n := len(spec.PinnedCells); n > 0 {
		var ids []string
		for i, c := range spec.PinnedCells {
			if i == 2 && n > 3 {
				ids = append(ids, fmt.Sprintf("+%d", n-2))
				break
			}
			ids = append(ids, c.PinnedCellID)
		}
		parts = append(parts, "pinned:"+strings.Join(ids, ","))
	}
	return strings.Join(parts, ",")
}

// cellsLostCondition says in one sentence which of the VC's leaf cells are
// lost and why: the nodes, and the pods hivesched did not place that hold
// some of them.
func (r *Registry) cellsLostCondition(vc *hv1.VirtualCluster, cs cellcore.VirtualClusterStatus) metav1.Condition {
	c := metav1.Condition{Type: hv1.ConditionCellsLost, ObservedGeneration: vc.Generation}
	if cs.LostLeafCells == 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "NoneLost", "every leaf cell of the VC is on healthy hardware and free for its groups or used by them"
		return c
	}
	c.Status = metav1.ConditionTrue
	bad := cs.LostLeafCells - cs.ForeignLeafCells
	var parts []string
	if bad > 0 {
		parts = append(parts, fmt.Sprintf("%d on unhealthy hardware (bad, maintenance or retired nodes or devices)", bad))
	}
	if cs.ForeignLeafCells > 0 {
		pods, more := r.foreign.ForeignPodsOn(cs.ForeignNodes, 3)
		who := strings.Join(pods, ", ")
		if more > 0 {
			who += fmt.Sprintf(" and %d more", more)
		}
		parts = append(parts, fmt.Sprintf("%d held by pods hivesched did not place (%s on %s)", cs.ForeignLeafCells, who, strings.Join(cs.ForeignNodes, ", ")))
	}
	switch {
	case bad > 0 && cs.ForeignLeafCells > 0:
		c.Reason = "UnhealthyHardwareAndForeignPods"
	case bad > 0:
		c.Reason = "UnhealthyHardware"
	default:
		c.Reason = "ForeignPods"
	}
	nodes := cs.LostNodes
	suffix := ""
	if len(nodes) > 5 {
		suffix = fmt.Sprintf(" and %d more", len(nodes)-5)
		nodes = nodes[:5]
	}
	c.Message = fmt.Sprintf("%d of the VC's leaf cells are lost, on nodes %s%s: %s; its groups cannot use them until they come back",
		cs.LostLeafCells, strings.Join(nodes, ", "), suffix, strings.Join(parts, "; "))
	return c
}

// leafUseEvery is the least time between two counts of the lent cells: a
// copy of the whole tree under the core's lock (4 ms at 10,000 nodes), made
// only while a VC has cells neither used nor free.
const leafUseEvery = time.Second

// leafUse is the VC's lent and reserved cells as last counted, at most
// leafUseEvery ago (the status writer's goroutine). A count older than
// that is made anew; until then a change is Unavailable rather than Lent,
// or the other way round: the columns add up whatever the count's age.
func (r *Registry) leafUse(vc string, now time.Time) LeafUse {
	r.useMu.Lock()
	defer r.useMu.Unlock()
	if r.use == nil || now.Sub(r.useAt) >= leafUseEvery {
		recs := r.core.CellRecords(r.useBuf[:0], "", "")
		r.use = CountLeafUse(recs)
		clear(recs)
		r.useBuf = recs[:0]
		r.useAt = now
	}
	return r.use[vc]
}
