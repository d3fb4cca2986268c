package hivesched

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/cellspec"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// vcRegistry is the plugin's view of the VirtualCluster objects: access
// rules and lifecycle state for PreFilter, and what the status writer needs.
type vcRegistry struct {
	mu  sync.Mutex
	vcs map[string]*vcEntry
}

type vcEntry struct {
	obj       *hv1.VirtualCluster
	rejected  string    // why the core refused the spec, or ""
	applied   bool      // the core holds the spec
	lastWrite time.Time // of its status, for the writer's rate limit
}

func newVCRegistry() *vcRegistry { return &vcRegistry{vcs: map[string]*vcEntry{}} }

// admits says why a namespace may not start a new group in a VC, or "".
func (r *vcRegistry) admits(vc, namespace string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.vcs[vc]
	if e == nil {
		for name, o := range r.vcs {
			if o.obj.Annotations[hv1.AnnotationHivedName] == vc {
				return fmt.Sprintf("virtual cluster %q does not exist: VirtualCluster %q was converted from HiveD's %q (Kubernetes names are lowercase), name it in the pod", vc, name, vc)
			}
		}
		return fmt.Sprintf("virtual cluster %q does not exist (kubectl get virtualclusters)", vc)
	}
	if e.rejected != "" {
		return fmt.Sprintf("virtual cluster %q is Rejected: %s", vc, e.rejected)
	}
	switch e.obj.Spec.State {
	case hv1.VirtualClusterDraining, hv1.VirtualClusterStopped:
		return fmt.Sprintf("virtual cluster %q is %s: it admits no new affinity groups", vc, e.obj.Spec.State)
	}
	for _, ns := range e.obj.Spec.AllowedNamespaces {
		if ns == hv1.AllNamespaces || ns == namespace {
			return ""
		}
	}
	return fmt.Sprintf("namespace %q may not use virtual cluster %q (not in its spec.allowedNamespaces)", namespace, vc)
}

// object returns the VirtualCluster as last read, or nil.
func (r *vcRegistry) object(vc string) *hv1.VirtualCluster {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.vcs[vc]; e != nil {
		return e.obj
	}
	return nil
}

// applyVC hands a VC's spec to the core. A spec the cluster cannot host is
// Rejected (status condition and event); the other VCs keep working.
func (p *HiveSched) applyVC(logger klog.Logger, vc *hv1.VirtualCluster) {
	res, err := p.core.SetVirtualCluster(cellspec.VirtualCluster(vc))
	p.vcs.mu.Lock()
	e := p.vcs.vcs[vc.Name]
	if e == nil {
		e = &vcEntry{}
		p.vcs.vcs[vc.Name] = e
	}
	e.obj = vc
	wasRejected := e.rejected
	if err != nil {
		e.rejected = err.Error()
	} else {
		e.rejected, e.applied = "", true
	}
	p.vcs.mu.Unlock()
	p.statusChanged()
	if err != nil {
		logger.Error(err, "virtual cluster rejected", "virtualCluster", vc.Name)
		if wasRejected != err.Error() {
			p.event(vc, "Warning", "Rejected", err.Error())
		}
		return
	}
	for _, g := range res.Downgraded {
		logger.Info("virtual cluster shrank: affinity group runs on as opportunistic (lazy preemption)", "virtualCluster", vc.Name, "group", g)
		p.event(vc, "Normal", "Downgraded", fmt.Sprintf("affinity group %s no longer fits the virtual cluster and runs on as opportunistic", g))
		p.downgraded(logger, g, vcNote(g, vc.Name, "shrank below what its groups use"))
	}
	p.activateWaiting(logger, vc.Name) // its capacity changed
}

// activateWaiting requeues the unbound pods of a VC's groups and of every
// opportunistic group (they may use any free cell); with vc "", of all groups.
func (p *HiveSched) activateWaiting(logger klog.Logger, vc string) {
	pods := p.groups.UnboundPods(func(req *podrequest.Request) bool {
		return vc == "" || req.Group.VirtualCluster == vc || req.Group.Priority < 0
	})
	if len(pods) > 0 {
		p.handle.Activate(logger, pods)
	}
}

func (p *HiveSched) onVC(logger klog.Logger, obj interface{}, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	vc, ok := obj.(*hv1.VirtualCluster)
	if !ok {
		return
	}
	if !deleted {
		p.vcs.mu.Lock()
		e := p.vcs.vcs[vc.Name]
		same := e != nil && e.obj.Generation == vc.Generation && e.obj.ResourceVersion != "" && e.applied &&
			equality.Semantic.DeepEqual(e.obj.Spec, vc.Spec)
		if same {
			e.obj = vc // a status write: keep the newest object
		}
		p.vcs.mu.Unlock()
		if !same {
			p.applyVC(logger, vc)
		}
		return
	}
	p.vcs.mu.Lock()
	delete(p.vcs.vcs, vc.Name)
	p.vcs.mu.Unlock()
	res, err := p.core.RemoveVirtualCluster(vc.Name)
	if err != nil {
		logger.V(2).Info("removing virtual cluster", "virtualCluster", vc.Name, "err", err)
	}
	for _, g := range res.Downgraded {
		logger.Info("virtual cluster deleted: affinity group runs on as opportunistic", "virtualCluster", vc.Name, "group", g)
		p.downgraded(logger, g, vcNote(g, vc.Name, "was deleted"))
	}
	p.statusChanged()
}

// statusChanged tells the status writer that a VC's status may have
// changed. It never blocks (the scheduling path calls it): announcements
// that come while one is pending are one.
func (p *HiveSched) statusChanged() {
	select {
	case p.statusKick <- struct{}{}:
	default:
	}
}

// statusSettle is how long the writer waits after a change is announced: the
// changes of one decision (a gang placed, its victims' pods going) land in
// one write.
const statusSettle = 100 * time.Millisecond

// runStatusWriter writes VC statuses in the background; the scheduling path
// never waits on it. A change is written promptly (statusSettle after it is
// announced), yet each VC's status at most once per statusEvery: changes
// that follow a write within the interval are written together when it
// ends. A pass every statusEvery also catches a change nobody announced.
// (It used to write only on that tick, so a status lagged up to a whole
// interval behind: 5 s in the shipped configurations.)
func (p *HiveSched) runStatusWriter(ctx context.Context) {
	logger := klog.FromContext(ctx)
	tick := time.NewTicker(p.statusEvery)
	defer tick.Stop()
	held := time.NewTimer(p.statusEvery) // changes held back by the rate limit
	held.Stop()
	defer held.Stop()
	settle := min(statusSettle, p.statusEvery)
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.statusKick:
			select {
			case <-ctx.Done():
				return
			case <-time.After(settle):
			}
			select { // an announcement made while settling is in this pass
			case <-p.statusKick:
			default:
			}
		case <-tick.C:
		case <-held.C:
		}
		if next := p.writeStatuses(ctx, logger, time.Now()); !next.IsZero() {
			held.Reset(time.Until(next))
		}
	}
}

// writeStatuses writes the statuses that changed, but for VCs whose status
// was written less than statusEvery ago: it returns when the first of those
// may be written (zero if none waits).
func (p *HiveSched) writeStatuses(ctx context.Context, logger klog.Logger, now time.Time) time.Time {
	if !p.recovered.Load() {
		// Not leading yet (or not recovered): this replica's view is
		// empty, and the leader writes the statuses.
		return time.Time{}
	}
	p.vcs.mu.Lock()
	entries := make([]*vcEntry, 0, len(p.vcs.vcs))
	objs := make([]*hv1.VirtualCluster, 0, len(p.vcs.vcs))
	rejected := make([]string, 0, len(p.vcs.vcs))
	last := make([]time.Time, 0, len(p.vcs.vcs))
	for _, e := range p.vcs.vcs {
		entries = append(entries, e)
		objs = append(objs, e.obj)
		rejected = append(rejected, e.rejected)
		last = append(last, e.lastWrite)
	}
	p.vcs.mu.Unlock()
	var next time.Time
	for i, vc := range objs {
		st := p.vcStatus(vc, rejected[i])
		if statusEqual(vc.Status, st) {
			continue
		}
		if due := last[i].Add(p.statusEvery); now.Before(due) {
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		nextObj := vc.DeepCopy()
		nextObj.Status = st
		updated, err := p.vcClient.HiveschedV1alpha1().VirtualClusters().UpdateStatus(ctx, nextObj, metav1.UpdateOptions{})
		if err != nil {
			logger.V(2).Info("writing virtual cluster status", "virtualCluster", vc.Name, "err", err)
			continue // the next pass tries again
		}
		p.vcs.mu.Lock()
		entries[i].lastWrite = now
		if entries[i] == p.vcs.vcs[vc.Name] && entries[i].obj.ResourceVersion == vc.ResourceVersion {
			entries[i].obj = updated
		}
		p.vcs.mu.Unlock()
	}
	return next
}

// statusEqual compares statuses but for condition timestamps.
func statusEqual(a, b hv1.VirtualClusterStatus) bool {
	a, b = *a.DeepCopy(), *b.DeepCopy()
	clearConditionTimes(a.Conditions)
	clearConditionTimes(b.Conditions)
	return equality.Semantic.DeepEqual(a, b)
}

// clearConditionTimes zeroes the conditions' LastTransitionTime (statuses
// are compared without them: SetStatusCondition stamps a new condition).
func clearConditionTimes(cs []metav1.Condition) {
	for i := range cs {
		cs[i].LastTransitionTime = metav1.Time{}
	}
}

// vcStatus builds a VC's status from the core's counters.
func (p *HiveSched) vcStatus(vc *hv1.VirtualCluster, rejected string) hv1.VirtualClusterStatus {
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
	cs, ok := p.core.VirtualClusterStatus(vc.Name)
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
	apimeta.SetStatusCondition(&st.Conditions, p.cellsLostCondition(vc, cs))
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
func (p *HiveSched) cellsLostCondition(vc *hv1.VirtualCluster, cs cellcore.VirtualClusterStatus) metav1.Condition {
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
		pods, more := p.devices.foreignPodsOn(cs.ForeignNodes, 3)
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
