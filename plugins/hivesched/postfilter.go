package hivesched

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/metrics"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// PostFilter carries out a preemption decided in PreFilter (AG e1): every pod
// of every victim group is deleted (whole gangs, never part of one; the
// deletions run in the background, see binding.Evictor), and the pod is
// nominated to its reserved node. It schedules once the victims are gone
// (cell e9, AG e4, then AG e2 on its next PreFilter).
//
// A pod that PreFilter refused (a bad request, or a group that waits) gets
// UnschedulableAndUnresolvable with no message: the core's decision is all
// there is to say, no other plugin's PostFilter can change it. The framework
// then runs no PostFilter plugin after HiveSched and reports only this empty
// status, so the pod's FailedScheduling event is PreFilter's one sentence.
// (With Unschedulable, the framework appends the words of every PostFilter
// plugin that ran: DynamicResources, enabled by default and ordered before
// HiveSched, says "no new claims to deallocate" for any pod without claims.)
// Pods HiveSched did not refuse (a plain pod, or ours rejected by another
// Filter plugin) are left to the other PostFilter plugins.
func (p *HiveSched) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	s := readState(state)
	if s != nil && s.rejected {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable)
	}
	if s != nil && s.preempt == nil && s.node != "" {
		p.releaseRejectedPlacement(klog.FromContext(ctx), pod, s, statuses.Get(s.node))
	}
	if s == nil || s.preempt == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	p.evictVictims(klog.FromContext(ctx), pod, s.group, s.preempt.Victims)
	node := ""
	for _, pp := range s.preempt.Pods {
		if pp.LeafCellNumber == s.leaves && pp.Node != "" {
			node = pp.Node
			break
		}
	}
	if node == "" {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable) // PreFilter said it
	}
	return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride}},
		fwk.NewStatus(fwk.Success)
}

// releaseRejectedPlacement gives back the cells of a placed group whose pod
// the node it was placed on rejects for good: another filter said
// UnschedulableAndUnresolvable (a node selector or taint that does not
// match, less allocatable than the pod asks for, an unhealthy node), so
// holding the cells only keeps them from the VC's other groups. When no
// member of the group got through yet (none reserved or bound), the group is
// rolled back at once (x1) and placed again when the pod is retried. A
// member waiting at Permit instead times out and Unreserve rolls the group
// back; a resolvable rejection (the node is busy now) keeps the cells until
// PreFilter finds the placement stale (twice the Permit timeout).
func (p *HiveSched) releaseRejectedPlacement(logger klog.Logger, pod *v1.Pod, s *cycleState, st *fwk.Status) {
	if st == nil || st.Code() != fwk.UnschedulableAndUnresolvable || !p.groups.Unused(s.group) {
		return
	}
	if err := p.core.RollbackAffinityGroup(s.group); err != nil {
		return // not Allocated (any more): nothing is held for it
	}
	p.vcs.Changed()
	plugin, reasons := st.Plugin(), strings.Join(st.Reasons(), "; ")
	msg := fmt.Sprintf("affinity group %s gave its cells back: node %s, where it was placed, rejects the pod (%s: %s); it is placed again when the pod is retried",
		s.group, s.node, plugin, reasons)
	if strings.Contains(reasons, HivedSchedulingEnableResource) {
		msg += fmt.Sprintf("; the scheduler profile must list %s in NodeResourcesFit's ignoredResources (manifests/scheduler)", HivedSchedulingEnableResource)
	}
	logger.Info("placed affinity group rolled back: its node rejects the pod", "pod", klog.KObj(pod), "group", s.group, "node", s.node, "plugin", plugin, "reasons", reasons)
	p.event(pod, v1.EventTypeWarning, "PlacementRejected", msg)
}

// evictVictims deletes every pod of every victim group (whole gangs), in the
// background; a victim group without pods is deleted from the core at once.
// Called by PostFilter when a preemption is decided, and again by PreFilter
// while the preemptor waits, so that a deletion that failed is retried.
func (p *HiveSched) evictVictims(logger klog.Logger, preemptor *v1.Pod, group string, victims []string) {
	var pods []*v1.Pod
	for _, victim := range victims {
		vps := p.groups.Pods(victim)
		if len(vps) == 0 {
			// No pod left to delete: the group is gone as far as Kubernetes
			// knows. No deletion event will requeue the preemptors it frees.
			res, err := p.core.DeleteAffinityGroup(victim)
			if err != nil {
				logger.Error(err, "deleting a victim group without pods", "group", victim)
			}
			p.vcs.Changed()
			p.activate(logger, res.ReadyPreemptors)
			continue
		}
		pods = append(pods, vps...)
		for _, x := range p.core.ExtrasOf(victim) {
			// A preempted gang's extra pods end with it (its own
			// extras are ranked below it: only a gang whose extras could
			// not make room is preempted whole).
			pods = append(pods, p.groups.Pods(x)...)
		}
	}
	for _, victim := range victims {
		p.ags.Preempted(victim, group)
	}
	for _, vp := range p.victims.Evict(logger, pods) {
		victim := p.groups.GroupOf(vp)
		metrics.VictimPod(p.groupVC(victim))
		logger.Info("preempting", "victim", klog.KObj(vp), "group", victim, "preemptor", klog.KObj(preemptor), "preemptorGroup", group)
		p.event(vp, v1.EventTypeNormal, "Preempted", fmt.Sprintf("preempted by affinity group %s (whole group %s is deleted)", group, victim))
	}
}

// stillVictim reports whether pod's group is still being preempted: a
// victim whose preemption was called off (AG x2: its preemptor was deleted
// or placed elsewhere) is left running.
func (p *HiveSched) stillVictim(pod *v1.Pod) bool {
	group := p.groups.GroupOf(pod)
	st, ok := p.core.AffinityGroupState(group)
	if gang := podrequest.GangOfExtra(group); ok && st == cellcore.AGAllocated && gang != "" {
		// An extra pod of a preempted gang goes with it.
		gst, gok := p.core.AffinityGroupState(gang)
		return !gok || gst == cellcore.AGBeingPreempted
	}
	return ok && st == cellcore.AGBeingPreempted
}
