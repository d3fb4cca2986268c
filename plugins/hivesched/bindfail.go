package hivesched

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/internal/english"
	"github.com/hivesched/hivesched/plugins/metrics"
)

// Bind failures (seed 004, docs/affinitygroups.md "Bind failures"). A
// member whose binding call fails is retried on the cells its group holds:
// the group stays Allocated, so no other group takes them while the member
// waits out the framework's backoff. After maxBindAttempts failures of a
// member in a row the scheduler gives up on the placement: the group goes
// back to Pending (AG extension x1) and is placed again, and members that
// did bind are deleted first, because a gang is never left partly bound
// and an Allocated group cannot go Pending while pods run on its cells.

// reasonPlacementGivenUp is the event reason of a give-up. Not BindFailed,
// the retries' reason: events of one reason about one pod are folded into
// a series that keeps the first note, and the give-up must be read.
const reasonPlacementGivenUp = "PlacementGivenUp"

// bindFailed handles Unreserve after the member's binding failed (Bind's
// call, or PreBind's placement patch when another plugin binds): below the
// limit only this member retries, on the same cells; at the limit the
// scheduler gives up on the placement.
func (p *HiveSched) bindFailed(ctx context.Context, s *cycleState, pod *v1.Pod, nodeName string) {
	logger := klog.FromContext(ctx)
	group := s.group
	p.groups.UnreserveMember(group, pod)
	if st, ok := p.core.AffinityGroupState(group); !ok || st != cellcore.AGAllocated {
		// Given up by another member's failure, preempted or deleted
		// meanwhile: nothing to retry on.
		return
	}
	n, limit := p.binds.retries.Failed(group, pod.UID)
	metrics.BindFailed(p.groupVC(group))
	if !limit {
		msg := fmt.Sprintf("binding member %s to node %s failed (attempt %d of %d): %v; it is retried on the same cells after a backoff",
			pod.Name, nodeName, n, p.binds.retries.Limit(), s.bindErr)
		logger.Info("binding failed, retrying on the same cells", "pod", klog.KObj(pod), "group", group, "node", nodeName, "attempt", n, "err", s.bindErr)
		p.event(pod, v1.EventTypeWarning, "BindFailed", msg)
		p.ags.Waiting(group, "BindFailed", msg, nil)
		return
	}
	// The API server, not the informer, says which members are bound: a
	// binding whose response was lost may have gone through.
	bound, err := p.boundMembers(ctx, group)
	if err != nil {
		// Unknown which members are bound (the API server is down, say):
		// rolling back might free cells that pods run on. Keep the cells;
		// the member's next failure asks again.
		logger.Info("binding failed, and which members are bound is unknown: keeping the placement", "pod", klog.KObj(pod), "group", group, "attempts", n, "err", err)
		p.event(pod, v1.EventTypeWarning, "BindFailed", fmt.Sprintf("binding member %s to node %s failed %d times in a row (last: %v); the placement is kept until the API server says which members are bound (%v)",
			pod.Name, nodeName, n, s.bindErr, err))
		return
	}
	for _, b := range bound {
		if b.UID == pod.UID {
			// This very binding went through after all.
			p.binds.retries.Bound(group, pod.UID)
			return
		}
	}
	p.binds.retries.GiveUp(group)
	metrics.BindGivenUp(p.groupVC(group))
	if len(bound) == 0 {
		msg := fmt.Sprintf("binding member %s to node %s failed %d times in a row (last: %v): affinity group %s gave its cells back and is Pending again, to be placed anew",
			pod.Name, nodeName, n, s.bindErr, group)
		logger.Info("giving up a placement after binding failures", "pod", klog.KObj(pod), "group", group, "node", nodeName, "attempts", n)
		p.rollBackGivenUp(logger, group, msg)
		return
	}
	names := make([]string, 0, len(bound))
	for _, b := range bound {
		names = append(names, b.Name)
	}
	sort.Strings(names)
	msg := fmt.Sprintf("binding member %s to node %s failed %d times in a row (last: %v): affinity group %s gives its placement up; its bound members %s are deleted (their owner creates them again) and the group is placed anew once they are gone, never left partly bound",
		pod.Name, nodeName, n, s.bindErr, group, english.JoinNames(names))
	logger.Info("giving up a partly bound placement after binding failures: deleting its bound members", "pod", klog.KObj(pod), "group", group, "node", nodeName, "attempts", n, "bound", names)
	p.ags.BindGaveUp(group, msg)
	for _, m := range p.groups.Pods(group) {
		p.event(m, v1.EventTypeWarning, reasonPlacementGivenUp, msg)
	}
	for _, b := range p.binds.evictor.Evict(logger, bound) {
		logger.V(2).Info("deleting a bound member of a group whose placement was given up", "pod", klog.KObj(b), "group", group)
	}
}

// rollBackGivenUp returns an abandoned placement with no bound member to
// Pending (AG x1) and tells the members why.
func (p *HiveSched) rollBackGivenUp(logger klog.Logger, group, msg string) {
	p.rollBack(group)
	p.groups.ClearReserved(group)
	p.ags.Waiting(group, "BindFailed", msg, nil)
	for _, m := range p.groups.Pods(group) {
		p.event(m, v1.EventTypeWarning, reasonPlacementGivenUp, msg)
	}
	p.rejectWaiting(group, msg)
	logger.V(2).Info("rolled back an abandoned placement", "group", group)
}

// givenUpPreFilter is PreFilter's part for a group whose placement was
// given up: rolled back once no member is bound or reserved, else the
// member waits for the bound ones to be deleted (their deletion requeues
// it). ok is false when the pod must wait with status st.
func (p *HiveSched) givenUpPreFilter(logger klog.Logger, state fwk.CycleState, group string) (rolledBack bool, st *fwk.Status) {
	if !p.binds.retries.GaveUp(group) {
		return false, nil
	}
	if p.groups.Unused(group) {
		p.rollBack(group)
		logger.V(2).Info("rolled back an abandoned placement: its bound members are gone", "group", group)
		return true, nil
	}
	msg := fmt.Sprintf("affinity group %s gave its placement up after binding failures: waiting for its bound members to be deleted before it is placed anew", group)
	_, st = reject(state, fwk.Unschedulable, msg)
	return false, st
}

// stillGivenUp is the bind evictor's check before every deletion attempt:
// only members of a group whose placement is still abandoned are deleted.
func (p *HiveSched) stillGivenUp(pod *v1.Pod) bool {
	return p.binds.retries.GaveUp(p.groups.GroupOf(pod))
}

// boundMembers asks the API server (not the informer) which members of the
// group are bound; an error when it cannot tell. Only the failure paths
// call it, never the hot path.
func (p *HiveSched) boundMembers(ctx context.Context, group string) ([]*v1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out []*v1.Pod
	for _, m := range p.groups.Pods(group) {
		got, err := p.handle.ClientSet().CoreV1().Pods(m.Namespace).Get(ctx, m.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && got.UID != m.UID) {
			continue // gone or replaced: nothing of it to keep
		}
		if err != nil {
			return nil, fmt.Errorf("reading member %s/%s: %w", m.Namespace, m.Name, err)
		}
		if got.Spec.NodeName != "" {
			out = append(out, got)
		}
	}
	return out, nil
}
