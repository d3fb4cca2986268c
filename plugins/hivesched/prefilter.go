package hivesched

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/internal/english"
	"github.com/hivesched/hivesched/plugins/metrics"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// stateKey is where PreFilter leaves its decision for the pod's later
// extension points.
const stateKey fwk.StateKey = Name

// cycleState is what PreFilter decided for the pod.
type cycleState struct {
	group   string
	node    string // the pod's node when placed
	preempt *cellcore.Decision
	leaves  int32
	// rejected: PreFilter refused the pod (bad request, or the group
	// waits); its message is the whole story, see PostFilter.
	rejected bool
	// bindErr: the binding cycle failed once the pod was on its way to
	// its node (Bind's call, PreBind's placement patch, or the profile's
	// binder after PreBind); Unreserve then retries it on the same cells
	// (bindfail.go). Only the pod's own binding goroutine touches it.
	bindErr error
	// gpuClaims: the pod asks through GPU claims (DRA), on its slot's
	// leaf cells indices; PreBind allocates them and notes them in claims
	// for the placement record (dra.State.AllocateClaims).
	gpuClaims bool
	indices   []int32
	claims    []placement.ClaimRecord
	// cellLess: a member of its gang that asks for no leaf cells: it holds
	// none, may run on any node the other filters allow, and is reserved,
	// permitted and bound with its gang.
	cellLess bool
}

func (s *cycleState) Clone() fwk.StateData { return s }

// reject records in the cycle state that PreFilter refused the pod with
// msg (PostFilter then adds nothing to it) and returns the status.
func reject(state fwk.CycleState, code fwk.Code, msg string) (*fwk.PreFilterResult, *fwk.Status) {
	state.Write(stateKey, &cycleState{rejected: true})
	return nil, fwk.NewStatus(code, msg)
}

func readState(state fwk.CycleState) *cycleState {
	d, err := state.Read(stateKey)
	if err != nil {
		return nil
	}
	s, _ := d.(*cycleState)
	return s
}

// PreFilter asks the core for the group's placement. The first member's call
// decides for the whole group (AG e0 or e1); the others find their slot. In
// order: the pod's request (a plain pod is skipped), what the group's state
// says of this pod (groupState), then its slot in a placed group (assign)
// or the group's decision (decide).
func (p *HiveSched) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	// Any cycle, a plain pod's too, ends the cycles before it: their
	// unconfirmed holds go (podgroupcycle.go).
	pgCycle := rootCycle(state.GetPodGroupSchedulingCycle())
	p.releaseOtherCycles(klog.FromContext(ctx), pgCycle)
	req, st := p.readRequest(ctx, state, pod)
	if st != nil {
		return nil, st
	}
	p.noteDisruptionMode(pod)
	if err := p.ensureRecovered(ctx); err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("recovering allocations: %w", err))
	}
	placed, st := p.groupState(ctx, state, pod, req)
	if st != nil {
		return nil, st
	}
	if placed {
		// Decided when the first member came: this member finds its slot.
		if err := p.core.CheckMember(req.Group); err != nil {
			return p.refuse(state, pod, req.Group.Name, "InvalidSchedulingSpec", err.Error())
		}
		return p.assign(ctx, state, pod, req)
	}
	return p.decide(ctx, state, pod, req, pgCycle)
}

// readRequest reads the pod's request: Skip for a plain pod, a refusal
// (InvalidSchedulingSpec on the pod) for a bad one.
func (p *HiveSched) readRequest(ctx context.Context, state fwk.CycleState, pod *v1.Pod) (*podrequest.Request, *fwk.Status) {
	req, err := p.request(pod)
	if _, missing := podrequest.IsMissingPodGroup(err); missing {
		// Read when the pod came, before the PodGroup informer delivered
		// its PodGroup: the queue lets the pod through once the PodGroup
		// is in the informer, which may be before this plugin's own
		// handler read the pod again. Read it again now; if the PodGroup
		// is still missing, the pod is told (once, after the API server
		// confirms) and waits for it.
		p.groups.ForgetRefused(pod)
		if req, err = p.request(pod); err != nil {
			if _, missing := podrequest.IsMissingPodGroup(err); missing {
				p.noteMissingPodGroup(klog.FromContext(ctx), pod, err)
				_, st := reject(state, fwk.UnschedulableAndUnresolvable, err.Error())
				return nil, st
			}
		}
	}
	if err == nil && req != nil {
		err = p.cellTypes.Load().CheckLeafCellType(req.Group.LeafCellType)
	}
	if podrequest.IsWaiting(err) {
		// Not a bad spec: the request waits for other objects (its
		// PodGroup, its claims, its gang's pods), and the pod is told so
		// as WaitingForMembers (waiting.go), never as InvalidSchedulingSpec.
		// The events API keys a series by object, type and reason, not by
		// note: a later refusal under the same reason (the PodGroup came,
		// and names no VC) would be recorded as a repeat of this one, with
		// this note, and the user would never read why the pod is refused.
		p.watchWaiting(pod)
		_, st := reject(state, fwk.UnschedulableAndUnresolvable, err.Error())
		return nil, st
	}
	if err != nil {
		p.event(pod, v1.EventTypeWarning, "InvalidSchedulingSpec", err.Error())
		_, st := reject(state, fwk.UnschedulableAndUnresolvable, err.Error())
		return nil, st
	}
	if req == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return req, nil
}

// refuse refuses the pod for good with reason, on the pod and the group's
// AffinityGroup.
func (p *HiveSched) refuse(state fwk.CycleState, pod *v1.Pod, group, reason, msg string) (*fwk.PreFilterResult, *fwk.Status) {
	p.event(pod, v1.EventTypeWarning, reason, msg)
	p.ags.Refuse(group, reason, msg)
	return reject(state, fwk.UnschedulableAndUnresolvable, msg)
}

// groupState says what the group's state means for this pod before any
// decision: placed (Allocated or Being preempted: the pod takes its slot),
// or a status that ends the cycle (its lifecycle ended, its gang lost a
// member and is on its way out, its VC refuses it, it waits for members).
// On the way it returns placements that cannot be used any more to Pending
// (given up after binding failures, or never bound).
func (p *HiveSched) groupState(ctx context.Context, state fwk.CycleState, pod *v1.Pod, req *podrequest.Request) (placed bool, st *fwk.Status) {
	logger := klog.FromContext(ctx)
	name := req.Group.Name
	if msg := p.ags.Ended(name, pod); msg != "" {
		_, st := reject(state, fwk.UnschedulableAndUnresolvable, msg)
		return false, st
	}
	agState, hasGroup := p.core.AffinityGroupState(name)
	if why := p.lost.ending(name); why != "" {
		if hasGroup && (agState == cellcore.AGAllocated || agState == cellcore.AGBeingPreempted) {
			// Its old members are on their way out: placed anew, whole,
			// once they are gone (lostGangGone requeues it).
			_, st := reject(state, fwk.Unschedulable, why+
				": its other members are being deleted so that it never runs partly; this pod is placed with a new gang once they are gone")
			return false, st
		}
		p.lost.clear(name) // the old group holds no cells any more (it left the core, or was rolled back)
	}
	// Every member is admitted as a new group is, but one that takes cells
	// its running group already holds (a member of the placement being
	// bound, or the replacement of a member that is gone): refusing it would
	// leave a gang partly bound. A member that needs new cells (one that was
	// not running when its group was recovered) binds more of the VC, so its
	// namespace must still be allowed and the VC Active.
	if !hasGroup || agState == cellcore.AGPending || agState == cellcore.AGPreempting || !p.core.JoinsPlacement(name, podrequest.PodKey(pod), req.LeafCellNumber) {
		if reason := p.vcs.Admits(req.Group.VirtualCluster, pod.Namespace); reason != "" {
			_, st := p.refuse(state, pod, name, "VirtualClusterRefused", reason)
			return false, st
		}
	}
	if !hasGroup || agState != cellcore.AGAllocated {
		return hasGroup && agState == cellcore.AGBeingPreempted, nil
	}
	// A placement given up after binding failures goes back to Pending once
	// its bound members are gone (bindfail.go).
	rolledBack, st := p.givenUpPreFilter(logger, state, name)
	if st != nil {
		return false, st
	}
	if rolledBack {
		if have, want := p.groups.MemberCount(name), req.TotalPods(); have < want {
			// Its bound members were deleted: placed anew once its owner
			// has created them again (PreEnqueue holds it).
			_, st := reject(state, fwk.UnschedulableAndUnresolvable,
				fmt.Sprintf("waiting for the members of affinity group %s: %d of %d pods exist", name, have, want))
			return false, st
		}
		return false, nil
	}
	// A group allocated long ago whose pods never bound (another plugin keeps
	// rejecting its nodes) gives its cells back and is placed again.
	if p.groups.StaleAllocation(name, p.permitTimeout) {
		if err := p.core.RollbackAffinityGroup(name); err == nil {
			logger.V(2).Info("rolled back a group whose pods never bound", "group", name)
			p.vcs.Changed()
			return false, nil
		}
	}
	return true, nil
}

// decide asks the core for the group's placement (AG e0: placed, e1:
// preempt, or wait) and answers the pod: its slot, the preemption its
// PostFilter (or the pod-group cycle's PodGroupPostFilter) carries out, or
// why it waits.
func (p *HiveSched) decide(ctx context.Context, state fwk.CycleState, pod *v1.Pod, req *podrequest.Request, pgCycle fwk.PodGroupCycleState) (*fwk.PreFilterResult, *fwk.Status) {
	logger := klog.FromContext(ctx)
	name := req.Group.Name
	if p.dra != nil {
		// The decision signals the group's devices in flight in the shared
		// DRA manager under this pod's GPU claim, which its claim tracker
		// must hold (dra.State.Untracked): until it does, the pod waits.
		// The tracker's event for the claim requeues it (hintClaim).
		if c := p.dra.Untracked(pod); c != "" {
			return reject(state, fwk.Unschedulable, fmt.Sprintf(
				"waiting for the scheduler's claim cache to hold GPU claim %s before affinity group %s is placed", c, name))
		}
		p.beforeDecision(ctx, logger, name)
	}
	start := time.Now()
	d, err := p.core.Schedule(req.Group)
	metrics.PlacementDecided(start, d, err)
	if err != nil && !cellcore.IsSpecError(err) {
		return nil, internalError(ctx, "schedule", name, pod, err)
	}
	if err != nil {
		return p.refuse(state, pod, name, "InvalidSchedulingSpec", err.Error())
	}
	p.vcs.Changed()
	for _, g := range d.Downgraded {
		// Events and the placement records, the latter in the background.
		metrics.Downgraded(p.groupVC(g), p.groups.MemberCount(g))
		p.downgraded(logger, g, lazyNote(g, name, req.Group.Priority, req.Group.VirtualCluster))
	}
	switch d.Kind {
	case cellcore.Placed:
		if msg := p.ags.Ended(name, pod); msg != "" {
			// The pending timeout fired while the core placed it (the
			// writer forgot the group after this PreFilter's first
			// check): the cells go back.
			if _, err := p.core.DeleteAffinityGroup(name); err == nil {
				p.vcs.Changed()
			}
			return reject(state, fwk.UnschedulableAndUnresolvable, msg)
		}
		p.groups.Allocated(name)
		if req.Group.ExtraOverflow && p.core.AffinityGroupDowngraded(name) {
			// An extra placed beyond its full VC runs as opportunistic:
			// its placement record says so (elastic.go).
			p.groups.MarkDowngraded(name)
		}
		if pgCycle != nil {
			p.cycles.holds.add(name, pgCycle)
		}
		if p.dra != nil {
			p.dra.SignalGroup(logger, name, pod, d.Pods)
		}
		p.ags.Waiting(name, "Scheduled", "its cells are allocated: its pods bind", nil)
		return p.assign(ctx, state, pod, req)
	case cellcore.Preempt:
		for _, v := range d.Victims {
			metrics.VictimGroup(p.groupVC(v))
		}
		state.Write(stateKey, &cycleState{group: name, preempt: &d, leaves: req.LeafCellNumber})
		if pgCycle != nil {
			// No PostFilter runs in a pod-group cycle: the group's
			// PodGroupPostFilter evicts the victims.
			writePreempt(pgCycle, name, &d)
		}
		msg := fmt.Sprintf("affinity group %s (priority %d) preempts %s in virtual cluster %q and binds once their pods are deleted",
			name, req.Group.Priority, english.JoinNames(d.Victims), req.Group.VirtualCluster)
		p.ags.Waiting(name, "Preempting", msg, d.Victims)
		return nil, fwk.NewStatus(fwk.Unschedulable, msg)
	default:
		msg := d.Reason
		reason := "Waiting"
		if d.OverLimit {
			reason = "OverLimit"
		}
		if d.State == cellcore.AGPreempting && len(d.Victims) > 0 {
			msg = fmt.Sprintf("affinity group %s preempts %s and binds once their pods are deleted", name, english.JoinNames(d.Victims))
			reason = "Preempting"
			// Still waiting for victims: make sure every victim pod is on its
			// way out (a deletion that failed is asked for again).
			p.evictVictims(logger, pod, name, d.Victims)
		}
		p.ags.Waiting(name, reason, msg, d.Victims)
		return reject(state, fwk.Unschedulable, msg)
	}
}

// groupVC is the virtual cluster a group names ("" if the core does not
// know it), a metric label.
func (p *HiveSched) groupVC(group string) string {
	st, _ := p.core.AffinityGroupStatus(group)
	return st.VirtualCluster
}

// internalError answers an error of the core that is not a refusal of the
// user's request (cellcore.SpecError) but a state it did not expect: logged
// with the group, counted (hivesched_internal_errors_total by operation) and
// returned as an Error status, which the framework retries with its error
// backoff. Nothing is written on the pod or its AffinityGroup: it is not the
// user's mistake.
func internalError(ctx context.Context, operation, group string, pod *v1.Pod, err error) *fwk.Status {
	metrics.InternalError(operation)
	klog.FromContext(ctx).Error(err, "cell core internal error", "operation", operation, "group", group, "pod", klog.KObj(pod))
	return fwk.AsStatus(fmt.Errorf("affinity group %s: internal error, retried: %w", group, err))
}

// assign gives the pod its slot in its placed group and narrows the
// candidate nodes to the slot's node.
func (p *HiveSched) assign(ctx context.Context, state fwk.CycleState, pod *v1.Pod, req *podrequest.Request) (*fwk.PreFilterResult, *fwk.Status) {
	if req.CellLess() {
		// No cells, no slot: every node the profile's other filters
		// allow, CPU nodes included (HiveD's model has no such member:
		// docs/affinitygroups.md, "Members without GPUs").
		state.Write(stateKey, &cycleState{group: req.Group.Name, cellLess: true})
		return nil, nil
	}
	pp, err := p.core.AssignPod(req.Group.Name, podrequest.PodKey(pod), req.LeafCellNumber)
	if err != nil && !cellcore.IsSpecError(err) {
		return nil, internalError(ctx, "assign", req.Group.Name, pod, err)
	}
	if err != nil { // more pods than the group's members of that size
		p.event(pod, v1.EventTypeWarning, "InvalidSchedulingSpec", err.Error())
		return reject(state, fwk.UnschedulableAndUnresolvable, err.Error())
	}
	s := &cycleState{group: req.Group.Name, node: pp.Node, leaves: req.LeafCellNumber}
	if p.dra != nil && p.dra.HasGPUClaims(pod) {
		// Its GPU claims must hold nothing but this slot's devices.
		wait, err := p.dra.CheckClaims(ctx, pod, pp)
		if err != nil {
			p.event(pod, v1.EventTypeWarning, "InvalidSchedulingSpec", err.Error())
			return reject(state, fwk.UnschedulableAndUnresolvable, err.Error())
		}
		if wait != "" {
			return reject(state, fwk.Unschedulable, wait)
		}
		s.gpuClaims, s.indices = true, pp.LeafCellIndices
	}
	state.Write(stateKey, s)
	return &fwk.PreFilterResult{NodeNames: sets.New(pp.Node)}, nil
}

// PreFilterExtensions is nil: the decision does not depend on other pods
// being added or removed in the framework's what-if evaluations.
func (p *HiveSched) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter passes only the node PreFilter chose, and only while it is healthy.
// It reads the cycle state and the core's node health: no API call, no
// allocation on the passing path.
func (p *HiveSched) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s := readState(state)
	if s == nil {
		return nil
	}
	if s.rejected { // PreFilter refused the pod: no node is for it
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "refused by "+Name+" in PreFilter")
	}
	if s.cellLess {
		return nil
	}
	node := nodeInfo.Node()
	if node == nil || node.Name != s.node {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "affinity group "+s.group+" places this pod on node "+s.node)
	}
	if h, _ := p.core.NodeHealthOf(node.Name); h != cellcore.NodeHealthy {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node "+node.Name+" is "+h.String())
	}
	if s.gpuClaims {
		return p.draFilter(s, node.Name)
	}
	return nil
}
