package hivesched

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// Kubernetes 1.36+ pod-group scheduling cycle (feature gate GenericWorkload;
// pkg/scheduler/schedule_one_podgroup.go). The queue pops a pod group as
// one entity and the framework:
//
//  1. simulates: for each member PreFilter, Filter, Score and Reserve, the
//     pod assumed only into the snapshot (CycleState.IsPodGroupSchedulingCycle);
//  2. reverts the simulation: Unreserve for every member, the flag still
//     set, whether the group succeeded or not;
//  3. only if it succeeded: Reserve again (flag cleared), Permit and the
//     binding cycle for each member, on the node the simulation chose. If
//     it failed, PodGroupPostFilter may preempt.
//
// hivesched decides a gang once, in its first member's PreFilter (or in
// GeneratePlacements, with TopologyAwareWorkloadScheduling), and binds
// exactly that decision: the core holds the group's cells from the decision
// on, as a tentative hold of the cycle that made it. The simulated Reserve
// and Unreserve do nothing (no API call, no event, no rollback). Step 3's
// Reserve of a member confirms the hold: from then on the group is on the
// path every gang takes (Permit waits for all members, a failure rolls the
// whole group back). A hold that is not confirmed is released (AG x1, its
// cells Free) when the cycle ends without confirming it:
//
//   - Unschedulable: in PodGroupPostFilter, which the framework runs only
//     for that status;
//   - any outcome (Error and UnschedulableAndUnresolvable too): when the
//     failed pods are requeued at the end of the cycle
//     (AddAttemptedPodGroupIfNeeded runs the PreEnqueue plugins of every
//     pod of the group; the queue keeps the group's pods out of every queue
//     while its cycle runs, so a PreEnqueue of a member means no cycle of
//     its group is running);
//   - otherwise when any later scheduling cycle starts (PreFilter of any pod
//     of the profile) or, for an idle scheduler, after holdTimeout.
//
// Step 3's Reserve refuses a member whose hold was released, so a release
// can never bind cells the core no longer holds.

// holdTimeout bounds how long a hold no cycle confirmed outlives its cycle
// when no other scheduling cycle starts: far longer than any cycle.
const holdTimeout = 30 * time.Second

// preemptKey is where a member's PreFilter leaves its group's preemption
// decision in the pod-group cycle state, for PodGroupPostFilter.
const preemptKey fwk.StateKey = Name + "/preempt"

// podGroupCycles is what the pod-group cycle's extension points keep
// between them.
type podGroupCycles struct {
	// holds: groups placed by a pod-group cycle, not yet confirmed by its
	// binding step.
	holds *groupHolds
	// topology places the pod groups hivesched does not schedule, as the
	// in-tree TopologyPlacementGenerator would (only one placement
	// generator runs per profile); nil without
	// TopologyAwareWorkloadScheduling.
	topology fwk.PlacementGeneratePlugin
}

// groupHolds are the groups placed by a pod-group cycle and not confirmed
// by its step 3.
type groupHolds struct {
	mu sync.Mutex
	n  atomic.Int32 // len(byGroup): PreFilter's fast path reads it without the lock
	// byGroup: group -> the cycle that placed it, and when.
	byGroup map[string]groupHold
}

type groupHold struct {
	cycle fwk.PodGroupCycleState
	since time.Time
}

func newGroupHolds() *groupHolds { return &groupHolds{byGroup: map[string]groupHold{}} }

func (h *groupHolds) add(group string, cycle fwk.PodGroupCycleState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.byGroup[group] = groupHold{cycle: cycle, since: time.Now()}
	h.n.Store(int32(len(h.byGroup)))
}

// take removes the group's hold and reports whether there was one.
func (h *groupHolds) take(group string) bool {
	if h == nil || h.n.Load() == 0 {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.byGroup[group]
	delete(h.byGroup, group)
	h.n.Store(int32(len(h.byGroup)))
	return ok
}

// takeIf removes and returns the holds for which drop is true.
func (h *groupHolds) takeIf(drop func(groupHold) bool) []string {
	if h.n.Load() == 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for g, x := range h.byGroup {
		if drop(x) {
			out = append(out, g)
			delete(h.byGroup, g)
		}
	}
	h.n.Store(int32(len(h.byGroup)))
	return out
}

// heldBy reports whether the group is held by the cycle.
func (h *groupHolds) heldBy(group string, cycle fwk.PodGroupCycleState) bool {
	if h.n.Load() == 0 {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	x, ok := h.byGroup[group]
	return ok && x.cycle == cycle
}

// rootCycle is the cycle state of the root of a pod-group cycle: a
// composite pod group's children run with cycle states of their own, under
// their parent's placement.
func rootCycle(cs fwk.PodGroupCycleState) fwk.PodGroupCycleState {
	for cs != nil {
		parent := cs.GetParentPlacementCycleState()
		if parent == nil || parent.GetPodGroupSchedulingCycle() == nil {
			return cs
		}
		cs = parent.GetPodGroupSchedulingCycle()
	}
	return nil
}

// releaseHolds gives back the cells of the given unconfirmed holds: groups
// whose cycle ended without binding them.
func (p *HiveSched) releaseHolds(logger klog.Logger, groups []string, why string) {
	for _, g := range groups {
		if !p.groups.Unused(g) {
			continue // a member is reserved or bound: the usual path owns it
		}
		if p.rollBack(g) {
			logger.V(2).Info("released the cells of a pod group cycle's placement", "group", g, "why", why)
		}
	}
}

// releaseOtherCycles releases the holds of every cycle but this one (nil:
// a pod's own cycle): they ended, as only one scheduling cycle runs at a time.
func (p *HiveSched) releaseOtherCycles(logger klog.Logger, cycle fwk.PodGroupCycleState) {
	p.releaseHolds(logger, p.cycles.holds.takeIf(func(x groupHold) bool { return x.cycle != cycle }), "a later scheduling cycle started")
}

// releaseEndedCycle is PreEnqueue's part: the pod's group is requeued, so
// the cycle that holds it (if any) is over without confirming the hold (a
// confirmed hold is taken by step 3's Reserve). Under the queue's lock: a
// map lookup when nothing is held, one rollback in the core when it is.
func (p *HiveSched) releaseEndedCycle(logger klog.Logger, group string) {
	if p.cycles.holds.take(group) {
		p.releaseHolds(logger, []string{group}, "its pod group cycle ended without binding it")
	}
}

// releaseExpiredHolds releases holds older than holdTimeout (an idle
// scheduler starts no cycle that would); its janitor runs it every
// holdTimeout/3 (New).
func (p *HiveSched) releaseExpiredHolds(logger klog.Logger) {
	cut := time.Now().Add(-holdTimeout)
	p.releaseHolds(logger, p.cycles.holds.takeIf(func(x groupHold) bool { return x.since.Before(cut) }), "no cycle confirmed it in time")
}

// reserveInPodGroupCycle is Reserve for step 3 of a pod-group cycle: it
// confirms the group's hold, and refuses a member whose group no longer
// holds its cells (the hold was released: the pod is retried).
func (p *HiveSched) reserveInPodGroupCycle(pod *v1.Pod, s *cycleState) *fwk.Status {
	p.cycles.holds.take(s.group)
	if st, ok := p.core.AffinityGroupState(s.group); !ok || (st != cellcore.AGAllocated && st != cellcore.AGBeingPreempted) ||
		(!s.cellLess && !p.core.JoinsPlacement(s.group, podrequest.PodKey(pod), s.leaves)) {
		return fwk.NewStatus(fwk.Unschedulable, "affinity group "+s.group+" no longer holds its cells (its placement was released): it is placed again")
	}
	p.groups.Reserve(s.group, pod)
	return nil
}

// PodGroupPostFilter runs when a pod group's cycle failed: a group whose
// first member's PreFilter decided to preempt deletes its victims (whole
// gangs, inside its VC) and nominates each member to its node; a group the
// cycle placed but could not bind gives its cells back.
func (p *HiveSched) PodGroupPostFilter(ctx context.Context, state fwk.PodGroupCycleState, pgInfo fwk.PodGroupInfo, _ fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	state = rootCycle(state)
	var res *fwk.PodGroupPostFilterResult
	taken := map[string]map[int]bool{} // per group, the slots nominated so far
	for _, pod := range podGroupPods(pgInfo) {
		req, err := p.request(pod)
		if err != nil || req == nil {
			continue
		}
		group := req.Group.Name
		if d := readPreempt(state, group); d != nil {
			if taken[group] == nil {
				// Once per group: its victims are whole gangs.
				p.evictVictims(logger, pod, group, d.Victims)
			}
			if res == nil {
				res = &fwk.PodGroupPostFilterResult{NominatingInfos: map[types.NamespacedName]*fwk.NominatingInfo{}}
			}
			if taken[group] == nil {
				taken[group] = map[int]bool{}
			}
			if node := preemptNode(d, podrequest.PodKey(pod), req.LeafCellNumber, taken[group]); node != "" {
				res.NominatingInfos[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] =
					&fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride}
			}
			continue
		}
		if p.cycles.holds.heldBy(group, state) && p.cycles.holds.take(group) {
			p.releaseHolds(logger, []string{group}, "its pod group cycle failed")
		}
	}
	if res != nil {
		return res, nil
	}
	return nil, fwk.NewStatus(fwk.Unschedulable)
}

// preemptState is a group's preemption decision in the pod-group cycle state.
type preemptState struct{ d *cellcore.Decision }

func (s *preemptState) Clone() fwk.StateData { return s }

func writePreempt(state fwk.PodGroupCycleState, group string, d *cellcore.Decision) {
	state.Write(preemptKey+fwk.StateKey("/"+group), &preemptState{d: d})
}

func readPreempt(state fwk.PodGroupCycleState, group string) *cellcore.Decision {
	v, err := state.Read(preemptKey + fwk.StateKey("/"+group))
	if err != nil {
		return nil
	}
	s, _ := v.(*preemptState)
	if s == nil {
		return nil
	}
	return s.d
}

// preemptNode is the node a preemptor's member of leaves leaf cells will
// bind to once the victims are gone: its own slot's if the decision gave
// it one, else the first slot of its size not taken by another member.
func preemptNode(d *cellcore.Decision, key string, leaves int32, taken map[int]bool) string {
	free := -1
	for i, pp := range d.Pods {
		if pp.LeafCellNumber != leaves || pp.Node == "" {
			continue
		}
		if pp.PodKey == key {
			taken[i] = true
			return pp.Node
		}
		if free < 0 && pp.PodKey == "" && !taken[i] {
			free = i
		}
	}
	if free < 0 {
		return ""
	}
	taken[free] = true
	return d.Pods[free].Node
}

// podGroupPods are the unscheduled pods of a pod group (a composite
// group's are its leaf groups', which GetUnscheduledPods gathers).
func podGroupPods(pg fwk.PodGroupInfo) []*v1.Pod {
	return pg.GetUnscheduledPods()
}

// GeneratePlacements (TopologyAwareWorkloadScheduling) decides a hivesched
// gang before its members are simulated and returns one placement: the
// nodes of the cells the core chose, so the upstream cycle cannot wander
// off them. Other pod groups get the in-tree topology placements.
func (p *HiveSched) GeneratePlacements(ctx context.Context, state fwk.PodGroupCycleState, pg fwk.PodGroupInfo, parent *fwk.Placement) (*fwk.GeneratePlacementsResult, *fwk.Status) {
	for _, pod := range podGroupPods(pg) {
		req, err := p.request(pod)
		if err == nil && req == nil {
			continue
		}
		// The first hivesched member decides for the group, as its
		// PreFilter would (its real PreFilter then finds its slot).
		scratch := framework.NewCycleState()
		scratch.SetPodGroupSchedulingCycle(state)
		_, st := p.PreFilter(ctx, scratch, pod, nil)
		if !st.IsSuccess() {
			return nil, st
		}
		if req.CellLessPods > 0 {
			// Its members without cells may run on any node (CPU nodes
			// too): the placement is every node, and HiveSched's Filter
			// keeps each GPU member to its slot's node.
			return &fwk.GeneratePlacementsResult{Placements: []*fwk.Placement{{Name: req.Group.Name, Nodes: parent.Nodes}}}, nil
		}
		nodes := map[string]bool{}
		placed, _ := p.core.AffinityGroupStatus(req.Group.Name)
		for _, pp := range placed.Pods {
			nodes[pp.Node] = true
		}
		var in []fwk.NodeInfo
		for _, n := range parent.Nodes {
			if nodes[n.Node().Name] {
				in = append(in, n)
			}
		}
		return &fwk.GeneratePlacementsResult{Placements: []*fwk.Placement{{Name: req.Group.Name, Nodes: in}}}, nil
	}
	if p.cycles.topology != nil {
		return p.cycles.topology.GeneratePlacements(ctx, state, pg, parent)
	}
	return &fwk.GeneratePlacementsResult{Placements: []*fwk.Placement{parent}}, nil
}

// SignPod (KEP-5598 opportunistic batching): a pod hivesched does not
// schedule is signed with nothing of hivesched's (its decisions do not
// depend on hivesched), so that batching stays on for it; a pod that asks
// hivesched for cells, or whose request hivesched refuses, is not signed:
// each gang member has its own slot, never another pod's node.
func (p *HiveSched) SignPod(ctx context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	req, err := p.request(pod)
	if err != nil || req != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, "hivesched places the pod on its own cells")
	}
	return nil, nil
}
