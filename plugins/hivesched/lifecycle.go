package hivesched

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/placement"
)

// ReasonLazilyPreempted is the reason of the event on each pod of a
// guaranteed group that was downgraded to opportunistic: lazily preempted by
// a higher-priority group of its VC, or displaced because its VC shrank or
// was deleted. The group keeps running; any guaranteed group may preempt it.
const ReasonLazilyPreempted = "LazilyPreempted"

// downgraded makes a lazy downgrade visible on the group's pods: an event on
// each (unless note is empty: the pods said so already) and, in the
// background, the `downgraded` field of their persisted placement, so that a
// restarted scheduler keeps the group opportunistic. Called where the core
// reports downgrades (PreFilter, VC changes, recovery); it never calls the
// API server itself.
func (p *HiveSched) downgraded(logger klog.Logger, group, note string) {
	pods := p.groups.MarkDowngraded(group)
	for _, pod := range pods {
		if note != "" {
			p.event(pod, v1.EventTypeNormal, ReasonLazilyPreempted, note)
		}
		p.records.Add(pod)
	}
	if note != "" {
		logger.Info("affinity group downgraded to opportunistic", "group", group, "pods", len(pods), "why", note)
	}
}

// lazyNote is the event text for a group lazily preempted by another group.
func lazyNote(victim, preemptor string, priority int32, vc string) string {
	return fmt.Sprintf("affinity group %s was lazily preempted by affinity group %s (priority %d), which needs its cells in virtual cluster %q: "+
		"it keeps running, now as opportunistic (priority -1), and any guaranteed group may preempt it", victim, preemptor, priority, vc)
}

// vcNote is the event text for a group displaced by a change of its VC.
func vcNote(victim, vc, change string) string {
	return fmt.Sprintf("virtual cluster %q %s: affinity group %s keeps running, now as opportunistic (priority -1), and any guaranteed group may preempt it",
		vc, change, victim)
}

// needsDowngradeRecord: the pod is running with a persisted placement of a
// group the core may have downgraded, and its record does not say so yet.
func (p *HiveSched) needsDowngradeRecord(pod *v1.Pod, group string) bool {
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || !p.groups.MayBeDowngraded(group) {
		return false
	}
	raw, ok := pod.Annotations[placement.Annotation]
	if !ok {
		return false
	}
	rec, err := placement.Decode(raw)
	return err == nil && !rec.Downgraded
}

// groupDowngraded asks the core whether the group runs downgraded now. The
// group index's mark only says it was at some point (a group rolled back and
// placed again is guaranteed again).
func (p *HiveSched) groupDowngraded(group string) bool {
	if !p.groups.MayBeDowngraded(group) {
		return false
	}
	st, ok := p.core.AffinityGroupStatus(group)
	return ok && st.Downgraded
}

// pendingTimedOut gives up on a group that waited too long: its pods get
// an event and are refused from now on (PreFilter asks ended); the core
// forgets it (a Preempting group's reservations go back). Its pods are
// left to their owner unless the VC says to delete them.
func (p *HiveSched) pendingTimedOut(logger klog.Logger, group string, pods []*v1.Pod) {
	st, ok := p.core.AffinityGroupState(group)
	if ok && st == cellcore.AGAllocated && p.groups.BoundCount(group) == 0 {
		// Placed by a PreFilter that ran while the timeout fired: its
		// members wait at Permit (or bind now, and a bound one is adopted
		// from its record); the timeout wins.
		p.rejectWaiting(group, "affinity group "+group+" failed: pending timeout")
		st = cellcore.AGPending
	}
	if ok && (st == cellcore.AGPending || st == cellcore.AGPreempting) {
		res, err := p.core.DeleteAffinityGroup(group)
		if err != nil {
			logger.Error(err, "forgetting a timed-out affinity group", "group", group)
		}
		p.vcs.Changed()
		if res.FreedLeaves > 0 {
			p.activateWaiting(logger, "")
		}
	}
	vcName := ""
	if len(pods) > 0 {
		if req, err := p.request(pods[0]); err == nil && req != nil {
			vcName = req.Group.VirtualCluster
		}
	}
	del := false
	if vc := p.vcs.Object(vcName); vc != nil {
		del = vc.Spec.DeletePodsOnPendingTimeout
	}
	logger.Info("affinity group pending timeout", "group", group, "deletePods", del)
	for _, pod := range pods {
		note := fmt.Sprintf("affinity group %s failed: it was pending longer than its pending timeout; its pods are no longer scheduled", group)
		if del {
			note += " and are deleted (the virtual cluster's deletePodsOnPendingTimeout)"
		} else {
			note += " and are left to their owner"
		}
		p.event(pod, v1.EventTypeWarning, "PendingTimeout", note)
	}
	if del {
		for _, pod := range pods {
			if err := p.deleter.Delete(context.Background(), pod); err != nil {
				logger.Error(err, "deleting a timed-out pod", "pod", klog.KObj(pod))
			}
		}
	}
}
