package affinitygroups

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/apis/generated/clientset/versioned"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/statuswriter"
)

// writeQPS bounds the AffinityGroup writer's API calls per second (burst
// twice that): with many gangs at once, statuses lag rather than load the
// API server that binds pods.
const writeQPS = 20

// NewClient is the writer's client: its own, limited to writeQPS, so that
// a burst of gangs never takes the API server from binding (AffinityGroup
// writes are observability; their statuses lag instead).
func NewClient(kc *rest.Config) (versioned.Interface, error) {
	akc := rest.CopyConfig(kc)
	akc.QPS, akc.Burst = writeQPS, 2*writeQPS
	return versioned.NewForConfig(akc)
}

// Run writes AffinityGroup objects in the background until ctx ends, as
// the VC writer does (statuswriter.Run): each group at most once per
// interval; a pass every interval handles the time-driven transitions
// (pending timeout, expiry).
func (t *Tracker) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("affinitygroups")
	go t.runTimeouts(ctx, logger)
	statuswriter.Run(ctx, t.every, t.kick, func(now time.Time, all bool) time.Time {
		return t.write(ctx, logger, now, all)
	})
}

// runTimeouts decides pending timeouts on their own timer, at each group's
// deadline: the writer's pace (its rate-limited writes, shared by every
// tenant) never delays one. The status is written later, by the writer.
func (t *Tracker) runTimeouts(ctx context.Context, logger klog.Logger) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		var due []item
		var next time.Time
		if t.recovered() {
			t.mu.Lock()
			for k, e := range t.groups {
				switch at := e.timeoutAt; {
				case at.IsZero():
				case !now.Before(at):
					due = append(due, item{k, e})
				case next.IsZero() || at.Before(next):
					next = at
				}
			}
			t.mu.Unlock()
		}
		for _, d := range due {
			t.advance(ctx, logger, d.key, d.e, now, false)
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = time.Until(next)
		}
		if !t.recovered() {
			wait = time.Second // nothing is decided before this process holds the allocations
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.timeoutKick:
		case <-timer.C:
		}
	}
}

// settleGone asks the API server how the bound pods that left the informer
// ended: finished (Succeeded, Failed) or deleted while they ran. The
// writer calls it, off the scheduling path.
func (t *Tracker) settleGone(ctx context.Context, e *entry) {
	t.mu.Lock()
	var pods []*v1.Pod
	for _, pod := range e.unsure {
		pods = append(pods, pod)
	}
	t.mu.Unlock()
	for _, pod := range pods {
		got, err := t.pods.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			continue // asked again on the next pass
		}
		t.mu.Lock()
		delete(e.unsure, pod.UID)
		switch {
		case err == nil && got.UID == pod.UID && got.Status.Phase == v1.PodSucceeded:
			e.succeeded[pod.UID] = true
		case err == nil && got.UID == pod.UID && got.Status.Phase == v1.PodFailed:
			e.failedPods[pod.UID] = true
			e.fail("MemberFailed", fmt.Sprintf("member pod %s failed", pod.Name))
		default:
			// Deleted while it ran. A gang deleted whole by its owner (a
			// Job's or a RayCluster's deletion, kubectl delete) ended; one
			// that lost a member while the others ran is ended by the
			// scheduler, which says MemberLost.
			e.deletedRunning++
			t.changed(e)
		}
		t.mu.Unlock()
	}
}

// item is one group to write, picked under the tracker's lock.
type item struct {
	key string
	e   *entry
}

// write writes the groups that changed (all: every group, for the
// time-driven transitions) and returns when a held-back one may be written.
func (t *Tracker) write(ctx context.Context, logger klog.Logger, now time.Time, all bool) time.Time {
	if !t.recovered() {
		return time.Time{}
	}
	t.mu.Lock()
	var work []item
	var next time.Time
	for k, e := range t.groups {
		if !e.dirty && !all {
			continue
		}
		// Written less than an interval ago, or an implicit group's object
		// not due yet (see sync): not even looked at (the core's lock is
		// the scheduler's) until it may be written.
		due := e.lastWrite.Add(t.every)
		if e.lastWrite.IsZero() {
			due = time.Time{}
			if e.obj == nil && !e.explicit && !terminalPhase(e.phase) && e.failReason == "" {
				due = e.seenAt.Add(t.every)
			}
		}
		if !all && now.Before(due) {
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		work = append(work, item{k, e})
	}
	t.mu.Unlock()
	for _, w := range fairOrder(work, now) {
		due, err := t.sync(ctx, logger, w.key, w.e, now)
		if err != nil {
			logger.V(2).Info("writing affinity group", "group", w.key, "err", err)
			continue // dirty stays set: the next pass tries again
		}
		if !due.IsZero() && (next.IsZero() || due.Before(next)) {
			next = due
		}
	}
	return next
}

// fairOrder orders a pass's work by taking one group of each namespace in
// turn (groups by name within a namespace; the namespaces' order rotates
// from pass to pass): the writer's rate-limited writes are shared by the
// tenants, not taken by whichever namespace sorts first or has most groups.
func fairOrder(work []item, now time.Time) []item {
	byNS := map[string][]item{}
	var namespaces []string
	for _, w := range work {
		if _, ok := byNS[w.e.namespace]; !ok {
			namespaces = append(namespaces, w.e.namespace)
		}
		byNS[w.e.namespace] = append(byNS[w.e.namespace], w)
	}
	sort.Strings(namespaces)
	if n := len(namespaces); n > 1 {
		r := int(now.Unix() % int64(n))
		namespaces = append(namespaces[r:], namespaces[:r]...)
	}
	for _, ns := range namespaces {
		sort.Slice(byNS[ns], func(i, j int) bool { return byNS[ns][i].key < byNS[ns][j].key })
	}
	out := make([]item, 0, len(work))
	for i := 0; len(out) < len(work); i++ {
		for _, ns := range namespaces {
			if i < len(byNS[ns]) {
				out = append(out, byNS[ns][i])
			}
		}
	}
	return out
}

// sync moves one group along the phase table and writes its object. It
// returns when the group may be written next if the rate limit held it.
func (t *Tracker) sync(ctx context.Context, logger klog.Logger, key string, e *entry, now time.Time) (time.Time, error) {
	t.settleGone(ctx, e)
	a, ok := t.advance(ctx, logger, key, e, now, true)
	if !ok || !t.writes {
		return time.Time{}, nil
	}
	return t.persist(ctx, key, e, a, now)
}

// advanced is what advance decided of a group, for persist to write.
type advanced struct {
	st       hv1.AffinityGroupStatus
	obj      *hv1.AffinityGroup
	spec     *hv1.AffinityGroupSpec
	explicit bool
	owner    *metav1.OwnerReference
	last     time.Time
	seenAt   time.Time
	expire   bool
}

// advance moves one group along the phase table: its pending timeout, its
// phase, its status. It writes nothing. With mayExpire (the writer's
// passes) a group past its retention expires and leaves the tracker; its
// object, if the scheduler created it, is deleted by persist.
func (t *Tracker) advance(ctx context.Context, logger klog.Logger, key string, e *entry, now time.Time, mayExpire bool) (advanced, bool) {
	coreSt, inCore := t.core.AffinityGroupStatus(key)
	pods := t.members.Pods(key)
	var timedOut []*v1.Pod

	t.mu.Lock()
	if t.groups[key] != e {
		t.mu.Unlock()
		return advanced{}, false
	}
	e.dirty = len(e.unsure) > 0 // still to be asked
	if e.spec == nil {
		t.mu.Unlock()
		return advanced{}, false // nothing known of it yet but a name
	}
	if e.emptied && len(pods) == 0 && len(e.unsure) == 0 && len(e.succeeded) == 0 && !terminalPhase(e.phase) && e.failReason == "" {
		if !e.firstBound.IsZero() || e.deletedRunning > 0 {
			// It ran (a member was bound), and its owner or a user
			// deleted it: ended, as YuniKorn completes an application
			// with nothing left to run, even if no write saw it Running
			// (a job deleted within a second of binding).
			e.ended = true
		} else {
			e.fail("PodsDeleted", "every member pod was deleted before the group ran")
		}
	}
	obs := phaseObservation{admitted: inCore || !e.admitted.IsZero(), rejected: e.refused != "", total: e.total,
		succeeded: len(e.succeeded), live: len(pods), ended: e.ended}
	holds := inCore && coreSt.State != cellcore.AGPending
	obs.holds = holds
	running := 0
	for _, pod := range pods {
		if pod.Spec.NodeName != "" {
			obs.bound++
			if pod.Status.Phase == v1.PodRunning {
				running++
			}
		}
	}
	// Seed 004's pending timeout: admitted, nothing bound, too long. A
	// group the core has placed (Allocated) is binding, not pending: its
	// binding is bounded by the Permit timeout and maxBindAttempts.
	placed := inCore && coreSt.State == cellcore.AGAllocated
	if e.phase == hv1.AffinityGroupAccepted && e.failReason == "" && obs.bound == 0 && !e.admitted.IsZero() && !placed {
		if to := t.pendingTimeout(e); to > 0 && now.Sub(e.admitted) >= to {
			e.fail("PendingTimeout", fmt.Sprintf("pending for longer than its pending timeout of %s: %s", to, e.message))
			timedOut = pods
		}
	}
	obs.failed = e.failReason != ""
	if obs.admitted && e.admitted.IsZero() {
		e.admitted = now
	}
	if obs.bound > 0 && e.firstBound.IsZero() {
		e.firstBound = now
	}
	phase, _, err := advancePhase(key, e.phase, obs)
	if err != nil {
		logger.Error(err, "affinity group phase", "group", key)
	}
	if phase == hv1.AffinityGroupRunning && e.running.IsZero() {
		e.running = now
	}
	if terminalPhase(phase) && e.finished.IsZero() {
		e.finished = now
	}
	expire := false
	// A group that timed out pending keeps refusing its pods until they
	// are gone: it does not expire before.
	keep := e.failReason == "PendingTimeout" && len(pods) > 0
	if mayExpire && terminalPhase(phase) && phase != hv1.AffinityGroupExpired && now.Sub(e.finished) >= t.retention && !keep {
		if to, err := NextPhase(key, phase, PhaseExpire); err == nil {
			phase, expire = to, true
		}
	}
	e.phase = phase
	old := e.timeoutAt
	e.timeoutAt = time.Time{}
	if phase == hv1.AffinityGroupAccepted && e.failReason == "" && obs.bound == 0 && !placed && !e.admitted.IsZero() {
		if to := t.pendingTimeout(e); to > 0 {
			e.timeoutAt = e.admitted.Add(to)
		}
	}
	if !e.timeoutAt.IsZero() && !e.timeoutAt.Equal(old) {
		t.timeoutKick.Announce()
	}
	if len(timedOut) > 0 || expire {
		e.dirty = true // the writer writes (or deletes) what the timer decided
		t.kick.Announce()
	}
	a := advanced{st: agStatus(e, coreSt, inCore, pods, obs, running), obj: e.obj, spec: e.spec, explicit: e.explicit, owner: e.owner,
		last: e.lastWrite, seenAt: e.seenAt, expire: expire}
	if expire {
		t.forgetLocked(key)
	}
	t.mu.Unlock()

	if len(timedOut) > 0 {
		t.timedOut(logger, key, timedOut)
	}
	return a, true
}

// persist writes what advance decided: the group's object, created if
// needed, and its status, at most once per interval; an expired group's
// object, if the scheduler created it and nothing owns it, is deleted.
func (t *Tracker) persist(ctx context.Context, key string, e *entry, a advanced, now time.Time) (time.Time, error) {
	st, obj, spec, explicit, owner, last, seenAt, expire := a.st, a.obj, a.spec, a.explicit, a.owner, a.last, a.seenAt, a.expire
	if expire {
		if obj != nil && !explicit && len(obj.OwnerReferences) == 0 {
			// Created by the scheduler and owned by nothing: nobody else
			// would ever delete it. An owned one goes with its owner.
			err := t.client.HiveschedV1alpha1().AffinityGroups(obj.Namespace).Delete(ctx, obj.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &obj.UID}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return time.Time{}, err
			}
			return time.Time{}, nil
		}
	}
	if obj != nil && agStatusEqual(obj.Status, st) {
		return time.Time{}, nil
	}
	if due := last.Add(t.every); now.Before(due) && !expire {
		t.mu.Lock()
		e.dirty = true
		t.mu.Unlock()
		return due, nil
	}
	if obj == nil && !explicit && !terminalPhase(st.Phase) {
		// An implicit group's object is created once the group has been
		// known for an interval: a gang that binds at once is then created
		// Running (a create and one status write instead of three writes).
		if due := seenAt.Add(t.every); now.Before(due) {
			t.markDirty(key, e)
			return due, nil
		}
	}
	ns, group := splitGroup(key)
	name := group
	if obj != nil {
		name = obj.Name
	}
	client := t.client.HiveschedV1alpha1().AffinityGroups(ns)
	if obj == nil {
		if explicit {
			return time.Time{}, nil // the user deleted it: not recreated
		}
		t.mu.Lock()
		unwritable := e.unwritable
		t.mu.Unlock()
		if unwritable {
			return time.Time{}, nil
		}
		name = ObjectName(group)
		created := &hv1.AffinityGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{hv1.LabelManagedBy: hv1.ManagedByHivesched}}, Spec: *spec}
		if name != group {
			created.Annotations = map[string]string{AnnotationGroupName: group}
		}
		if owner != nil {
			created.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		got, err := client.Create(ctx, created, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			got, err = client.Get(ctx, name, metav1.GetOptions{})
		}
		if apierrors.IsInvalid(err) {
			// Retrying cannot help: the lifecycle goes on in memory.
			t.mu.Lock()
			e.unwritable = true
			t.mu.Unlock()
			klog.FromContext(ctx).Info("the API server refuses this group's AffinityGroup; it is not written", "group", key, "err", err)
			return time.Time{}, nil
		}
		if err != nil {
			t.markDirty(key, e)
			return time.Time{}, err
		}
		obj = got
	}
	next := obj.DeepCopy()
	next.Status = st
	updated, err := client.UpdateStatus(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsConflict(err) {
			if fresh, gerr := client.Get(ctx, name, metav1.GetOptions{}); gerr == nil {
				t.mu.Lock()
				if t.groups[key] == e {
					e.obj = fresh
				}
				t.mu.Unlock()
			}
		}
		t.markDirty(key, e)
		return time.Time{}, err
	}
	t.mu.Lock()
	e.lastWrite = now
	if t.groups[key] == e && (e.obj == nil || e.obj.UID == updated.UID) {
		e.obj = updated
	}
	t.mu.Unlock()
	return time.Time{}, nil
}

func (t *Tracker) markDirty(key string, e *entry) {
	t.mu.Lock()
	if t.groups[key] == e {
		e.dirty = true
	}
	t.mu.Unlock()
}

// pendingTimeout is the group's pending timeout: its own, else its VC's; 0
// for none. Called with the tracker's lock held.
func (t *Tracker) pendingTimeout(e *entry) time.Duration {
	if e.explicit && e.obj != nil && e.obj.Spec.PendingTimeoutSeconds != nil {
		return time.Duration(*e.obj.Spec.PendingTimeoutSeconds) * time.Second
	}
	if e.spec.PendingTimeoutSeconds != nil {
		return time.Duration(*e.spec.PendingTimeoutSeconds) * time.Second
	}
	if vc := t.vcs.Object(e.spec.VirtualCluster); vc != nil && vc.Spec.PendingTimeoutSeconds != nil {
		return time.Duration(*vc.Spec.PendingTimeoutSeconds) * time.Second
	}
	return 0
}

// agStatus builds a group's status. Called with the tracker's lock held.
func agStatus(e *entry, cs cellcore.AffinityGroupStatus, inCore bool, pods []*v1.Pod, obs phaseObservation, running int) hv1.AffinityGroupStatus {
	st := hv1.AffinityGroupStatus{Phase: e.phase, PreemptedBy: e.preemptedBy}
	if e.obj != nil {
		st.Conditions = append([]metav1.Condition(nil), e.obj.Status.Conditions...)
	}
	if inCore {
		st.State = cs.State.String()
	} else if obs.admitted {
		st.State = cellcore.AGDeleted.String()
	}
	st.Members = hv1.AffinityGroupMemberCounts{Total: int32(e.total), Bound: int32(obs.bound), Running: int32(running),
		Succeeded: int32(len(e.succeeded)), Failed: int32(len(e.failedPods))}
	st.MembersSummary = fmt.Sprintf("%d/%d", obs.bound, e.total)
	if len(e.extras) > 0 {
		// An elastic gang: its minimum, then the extra pods beyond it.
		bound := 0
		for _, b := range e.extras {
			if b {
				bound++
			}
		}
		st.MembersSummary += fmt.Sprintf(" min, +%d/%d extra", bound, len(e.extras))
	}
	switch {
	case e.failReason != "":
		st.Reason, st.Message = e.failReason, e.failMessage
	case e.phase == hv1.AffinityGroupRejected:
		st.Reason, st.Message = "Rejected", e.refused
	case e.ended && (e.phase == hv1.AffinityGroupCompleted || e.phase == hv1.AffinityGroupCompleting):
		st.Reason, st.Message = "Deleted", fmt.Sprintf("its member pods were deleted by their owner or a user (%d of them while they ran): the group ended", e.deletedRunning)
	case e.phase == hv1.AffinityGroupCompleted || e.phase == hv1.AffinityGroupCompleting:
		st.Reason, st.Message = "Succeeded", fmt.Sprintf("%d of %d member pods finished successfully", len(e.succeeded), e.total)
	case e.phase == hv1.AffinityGroupRunning || e.phase == hv1.AffinityGroupStarting:
		st.Reason, st.Message = "Bound", fmt.Sprintf("%d of %d member pods bound", obs.bound, e.total)
		if inCore && cs.State == cellcore.AGBeingPreempted {
			st.Reason, st.Message = "BeingPreempted", "a higher-priority group takes its cells: its pods are being deleted"
		}
	case e.phase == hv1.AffinityGroupNew && !obs.admitted && e.reason == "":
		st.Reason, st.Message = "WaitingForMembers", fmt.Sprintf("%d of %d member pods exist", obs.live, e.total)
	default:
		st.Reason, st.Message = e.reason, e.message
		if st.Reason == "" {
			st.Reason = "Waiting"
		}
	}
	if len(e.preempting) > 0 && inCore && cs.State == cellcore.AGPreempting {
		st.Preempting = append([]string(nil), e.preempting...)
	}
	names := map[string]string{}
	for _, pod := range pods {
		names[string(pod.UID)] = pod.Name
	}
	for _, pp := range cs.Pods {
		if n, ok := names[pp.PodKey]; ok {
			st.Pods = append(st.Pods, hv1.AffinityGroupPodStatus{Name: n, Node: pp.Node, LeafCellIndices: append([]int32(nil), pp.LeafCellIndices...), LeafCellType: pp.LeafCellType})
		}
	}
	sort.Slice(st.Pods, func(i, j int) bool { return st.Pods[i].Name < st.Pods[j].Name })
	tm := func(t time.Time) *metav1.Time {
		if t.IsZero() {
			return nil
		}
		return &metav1.Time{Time: t.Truncate(time.Second)}
	}
	st.AdmittedTime, st.FirstBoundTime, st.RunningTime, st.FinishedTime = tm(e.admitted), tm(e.firstBound), tm(e.running), tm(e.finished)
	sched := metav1.Condition{Type: hv1.ConditionScheduled, Status: metav1.ConditionFalse, Reason: "NotScheduled", Message: "the group holds no cells"}
	if inCore && (cs.State == cellcore.AGAllocated || cs.State == cellcore.AGBeingPreempted) {
		sched.Status, sched.Reason, sched.Message = metav1.ConditionTrue, "Allocated", "the group holds its cells"
	}
	apimeta.SetStatusCondition(&st.Conditions, sched)
	down := metav1.Condition{Type: hv1.ConditionDowngraded, Status: metav1.ConditionFalse, Reason: "Guaranteed", Message: "the group runs in its virtual cluster's cells"}
	if inCore && cs.Downgraded {
		down.Status, down.Reason, down.Message = metav1.ConditionTrue, "LazilyPreempted", "the group runs on as opportunistic (priority -1): any guaranteed group may preempt it"
	}
	apimeta.SetStatusCondition(&st.Conditions, down)
	return st
}

// agStatusEqual compares statuses but for condition timestamps.
func agStatusEqual(a, b hv1.AffinityGroupStatus) bool {
	return statuswriter.Equal(&a, &b, func(s *hv1.AffinityGroupStatus) []metav1.Condition { return s.Conditions })
}
