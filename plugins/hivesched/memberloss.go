package hivesched

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/plugins/binding"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// A gang never runs partly. When a member of a running gang is taken by
// anyone but HiveSched (another scheduler's preemption, HiveSchedPreemption
// for a system-critical pod, an eviction or a node drain, the kubelet), its
// other members are deleted too: the gang ends whole, its cells go back as
// its pods go (cell and AG events as for any deletion), and its owner (a
// Job, JobSet, training operator) creates its pods again, which are placed
// anew, whole. Taking a replacement into the lost member's cells instead
// would leave the others running on their own for as long as no replacement
// comes (a bare pod's never does), and a collective job whose peer is gone
// is hung anyway (docs/plugin.md, "Preemption by other plugins and
// schedulers").
//
// HiveSched's own deletions are not losses: a preempted group is Being
// preempted (its whole gang is deleted already), a placement given up after
// binding failures deletes its bound members itself (bindfail.go), and a
// member that finished (Succeeded, or Failed by its own containers) is no
// loss either: its owner decides what a failed member means.

// lossSettle is how long a loss is left to settle before the gang is ended:
// an owner that deletes a whole job (a Job's deletion, a user's kubectl
// delete) deletes every pod within it, and that is no loss of one member
// but the end of all (the AffinityGroup ends Completed, reason Deleted, and nothing is
// deleted twice). Whatever of the gang still runs and is not on its way out
// after it is deleted.
const lossSettle = 2 * time.Second

// lostGangs are the groups that lost a member while they ran, whose other
// members are being deleted; new pods of such a group wait until the old
// ones are gone (the group leaves the core), then are placed anew.
type lostGangs struct {
	ctx     context.Context  // the scheduler's lifetime (settleLost's reads)
	evictor *binding.Evictor // deletes the other members (set in New)

	mu     sync.Mutex
	groups map[string]string // group -> why it ends
}

func (l *lostGangs) mark(group, why string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.groups[group]; ok {
		return false
	}
	if l.groups == nil {
		l.groups = map[string]string{}
	}
	l.groups[group] = why
	return true
}

// ending says why the group ends ("" if it does not).
func (l *lostGangs) ending(group string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.groups[group]
}

func (l *lostGangs) clear(group string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.groups[group]
	delete(l.groups, group)
	return ok
}

// deletedWhileRunning says how a bound, unfinished member was deleted
// ("" if it was not: not bound, finished, or no deletion asked for).
// The pod informer only sees a deletion asked for (a deletion timestamp,
// with the DisruptionTarget condition that says by whom) until the pod is
// gone: its final event carries the pod as it was before it left, which is
// what a pod that merely finished looks like too (the informer's field
// selector drops Succeeded and Failed pods): settleLost asks the API server
// about those.
func deletedWhileRunning(pod *v1.Pod) string {
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp == nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return ""
	}
	how := "was deleted while it ran"
	if c := disruptionCondition(pod); c != nil {
		how += fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
	}
	return how
}

// disruptionCondition is the pod's DisruptionTarget condition (nil for
// none): set by whoever disrupts it (a scheduler's preemption, the
// eviction API, the taint manager, the kubelet), with the reason.
func disruptionCondition(pod *v1.Pod) *v1.PodCondition {
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue {
			return c
		}
	}
	return nil
}

// settleLost asks the API server how a bound member that left the pod
// informer without a deletion timestamp ended: gone (deleted at once, with
// no grace period) or Failed by a disruption (the kubelet's eviction, a
// node shutdown: status.reason or the DisruptionTarget condition) is a
// loss; Succeeded, or Failed by its own containers, is not (its owner
// decides what that means). Off the scheduling path, in the background.
func (p *HiveSched) settleLost(logger klog.Logger, pod *v1.Pod, group string) {
	if pod.Spec.NodeName == "" || p.lost.ending(group) != "" {
		return
	}
	if st, ok := p.core.AffinityGroupState(group); !ok || st != cellcore.AGAllocated || p.binds.retries.GaveUp(group) {
		return
	}
	inc, _ := p.core.AffinityGroupIncarnation(group)
	time.AfterFunc(lossSettle, func() {
		if p.lost.ctx.Err() != nil {
			return
		}
		got, err := p.handle.ClientSet().CoreV1().Pods(pod.Namespace).Get(p.lost.ctx, pod.Name, metav1.GetOptions{})
		how := ""
		switch {
		case apierrors.IsNotFound(err) || err == nil && got.UID != pod.UID:
			how = "was deleted while it ran"
		case err != nil:
			logger.V(2).Info("could not tell how a gang member ended", "pod", klog.KObj(pod), "group", group, "err", err)
			return
		case got.Status.Phase == v1.PodFailed:
			if c := disruptionCondition(got); c != nil {
				how = fmt.Sprintf("was stopped (%s: %s)", c.Reason, c.Message)
			} else if got.Status.Reason != "" {
				how = fmt.Sprintf("was stopped by its node (%s: %s)", got.Status.Reason, got.Status.Message)
			}
		}
		if how != "" {
			p.endLostGang(logger, pod, group, how, inc)
		}
	})
}

// memberLost ends the gang of a member lost while it ran (see lostGangs)
// once the loss settled (lossSettle): its other members are deleted. how
// says how it was lost.
func (p *HiveSched) memberLost(logger klog.Logger, pod *v1.Pod, group, how string) {
	if p.lost.ending(group) != "" || podrequest.GangOfExtra(group) != "" {
		return // an extra pod of an elastic gang is no member of its minimum: its gang runs on
	}
	inc, ok := p.core.AffinityGroupIncarnation(group)
	if !ok {
		return
	}
	time.AfterFunc(lossSettle, func() {
		if p.lost.ctx.Err() == nil {
			p.endLostGang(logger, pod, group, how, inc)
		}
	})
}

// endLostGang deletes the members of a gang that lost one, but those on
// their way out already (a whole gang deleted by its owner leaves none).
// inc is the group's incarnation when the loss was seen: a group of the
// same name created since (the owner's new pods, placed anew) lost nothing.
func (p *HiveSched) endLostGang(logger klog.Logger, pod *v1.Pod, group, how string, inc uint64) {
	if cur, ok := p.core.AffinityGroupIncarnation(group); !ok || cur != inc {
		return
	}
	if podrequest.GangOfExtra(group) != "" {
		return // an extra pod going is never a loss (elastic gangs)
	}
	if p.promos.wasSettled(pod.UID) || p.promos.pending(pod.UID) {
		return // an extra took (or takes, once the pod is gone) its slot
	}
	if st, ok := p.core.AffinityGroupState(group); ok && st == cellcore.AGAllocated {
		if pr, ok := p.promotableExtra(group, pod); ok {
			// An extra of its size takes its slot once its pod is gone
			// (promoteOnDeletion): the gang runs on.
			p.promos.add(pod.UID, pr)
			logger.V(2).Info("a member of an elastic gang goes: an extra pod of its size takes its place once it is gone", "pod", klog.KObj(pod), "group", group, "extra", pr.extra)
			return
		}
	}
	if st, ok := p.core.AffinityGroupState(group); !ok || st != cellcore.AGAllocated || p.binds.retries.GaveUp(group) {
		return // HiveSched is deleting it itself, or it never ran
	}
	var rest []*v1.Pod
	members := p.groups.Pods(group)
	for _, x := range p.core.ExtrasOf(group) {
		// An elastic gang's extra pods end with it: a Ray worker whose
		// head is gone, an executor whose driver is, runs for nothing.
		members = append(members, p.groups.Pods(x)...)
	}
	for _, m := range members {
		if m.UID != pod.UID && m.DeletionTimestamp == nil && m.Status.Phase != v1.PodSucceeded && m.Status.Phase != v1.PodFailed {
			rest = append(rest, m)
		}
	}
	if len(rest) == 0 {
		return
	}
	why := fmt.Sprintf("member pod %s of affinity group %s %s", pod.Name, group, how)
	if !p.lost.mark(group, why) {
		return // ending already
	}
	logger.Info("gang lost a member while it ran: its other members are deleted, so that it never runs partly", "pod", klog.KObj(pod), "group", group, "how", how, "others", len(rest))
	p.ags.MemberLost(group, why+": its other members are deleted so that it never runs partly; its owner's new pods are placed anew, whole")
	for _, m := range p.lost.evictor.Evict(logger, rest) {
		p.event(m, v1.EventTypeWarning, "GangMemberLost", why+
			": this pod is deleted with the rest of its gang, which never runs partly; its owner's new pods are placed anew, whole, once the old ones are gone")
	}
}

// stillLost is the evictor's check before each attempt: the group still ends
// (a pod of a group that left the core meanwhile is not deleted).
func (p *HiveSched) stillLost(pod *v1.Pod) bool {
	group := p.groups.GroupOf(pod)
	if gang := podrequest.GangOfExtra(group); gang != "" {
		group = gang // an extra pod ends with its gang
	}
	return p.lost.ending(group) != ""
}

// lostGangGone: the group left the core (its last pod went), so its new
// pods may be placed: they are sent back to the queue.
func (p *HiveSched) lostGangGone(logger klog.Logger, group string) {
	if p.lost.clear(group) {
		p.activate(logger, []string{group})
	}
}
