package hivesched

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/podrequest"
	"github.com/hivesched/hivesched/plugins/statuswriter"
)

// agTracker is the scheduler's view of every affinity group's lifecycle
// (docs/affinitygroups.md): what the AffinityGroup objects show. The
// scheduling path only notes facts in it (a map write under its lock, a
// non-blocking kick); the background writer (runAGWriter) turns them into
// phases through the phase table and writes the objects, rate limited per
// group. A nil *agTracker records nothing (tests of other parts).
//
// With affinityGroupStatus: false the tracker still runs every lifecycle
// (phases, the pending timeout) but writes no object: a pending timeout
// does not depend on the status being written.
type agTracker struct {
	mu     sync.Mutex
	groups map[string]*agEntry // by group name, namespace/name
	kick   statuswriter.Kick
	writes bool // create and write AffinityGroup objects
}

type agEntry struct {
	namespace, name string
	phase           hv1.AffinityGroupPhase
	spec            *hv1.AffinityGroupSpec // the group's request, once a pod or the object gave it
	total           int
	obj             *hv1.AffinityGroup // the object, as last read or written
	explicit        bool               // created by a user, not by the scheduler
	owner           *metav1.OwnerReference

	reason, message string // what it waits for (PreFilter) or why it ended
	refused         string // its VC refused it or its request is invalid (Rejected while New)
	failReason      string // set once it failed
	failMessage     string
	preempting      []string
	preemptedBy     string

	admitted, firstBound, running, finished time.Time
	succeeded, failedPods                   map[types.UID]bool
	members                                 map[types.UID]time.Time // pods of this lifecycle, by creation
	unsure                                  map[types.UID]*v1.Pod   // bound pods gone from the informer: finished or deleted?
	emptied                                 bool                    // its last live member went

	dirty     bool
	lastWrite time.Time
	// timeoutAt: when the group's pending timeout fires, while it is
	// Accepted with nothing bound; the writer wakes for it, whatever the
	// write interval.
	timeoutAt time.Time
	seenAt    time.Time // when this process first saw the group
}

func newAGTracker(writes bool) *agTracker {
	return &agTracker{groups: map[string]*agEntry{}, kick: statuswriter.NewKick(), writes: writes}
}

func splitGroup(group string) (string, string) {
	ns, name, _ := strings.Cut(group, "/")
	return ns, name
}

// entryLocked returns the group's entry, created New if missing.
func (t *agTracker) entryLocked(group string) *agEntry {
	e := t.groups[group]
	if e == nil {
		ns, name := splitGroup(group)
		e = &agEntry{namespace: ns, name: name, phase: hv1.AffinityGroupNew, succeeded: map[types.UID]bool{}, failedPods: map[types.UID]bool{},
			members: map[types.UID]time.Time{}, seenAt: time.Now()}
		t.groups[group] = e
	}
	return e
}

func (t *agTracker) changed(e *agEntry) {
	e.dirty = true
	t.kick.Announce()
}

// specOf is the AffinityGroup spec of a pod's request (the implicit form).
func specOf(req *podrequest.Request) *hv1.AffinityGroupSpec {
	s := &hv1.AffinityGroupSpec{VirtualCluster: req.Group.VirtualCluster, Priority: ptr.To(req.Group.Priority),
		LeafCellType: req.Group.LeafCellType, PinnedCell: req.Group.PinnedCellID, LazyPreemption: req.Group.LazyPreemptionEnable}
	for _, m := range req.Group.Members {
		s.Members = append(s.Members, hv1.AffinityGroupMember{PodNumber: m.PodNumber, LeafCellNumber: m.LeafCellNumber})
	}
	return s
}

// seen notes a live member pod (the pod informer). A new pod of a group
// that failed or ended starts a new lifecycle (a Job's retry).
func (t *agTracker) seen(pod *v1.Pod, req *podrequest.Request) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entryLocked(req.Group.Name)
	if (terminalPhase(e.phase) || e.failReason != "") && !e.oldMember(pod) && pod.Spec.NodeName == "" {
		e.restart()
	}
	e.members[pod.UID] = pod.CreationTimestamp.Time
	e.emptied = false
	if e.spec == nil {
		e.spec = specOf(req)
	}
	e.total = req.TotalPods()
	if e.owner == nil {
		if c := metav1.GetControllerOf(pod); c != nil {
			e.owner = &metav1.OwnerReference{APIVersion: c.APIVersion, Kind: c.Kind, Name: c.Name, UID: c.UID}
		}
	}
	if pod.Spec.NodeName != "" && e.firstBound.IsZero() {
		e.firstBound = time.Now()
	}
	t.changed(e)
}

// restart begins a new lifecycle of a group whose pods came back.
func (e *agEntry) restart() {
	*e = agEntry{namespace: e.namespace, name: e.name, phase: hv1.AffinityGroupNew, obj: e.obj, explicit: e.explicit, owner: e.owner, spec: e.spec, total: e.total,
		succeeded: map[types.UID]bool{}, failedPods: map[types.UID]bool{}, members: map[types.UID]time.Time{}}
	if e.explicit && e.obj != nil {
		e.spec = &e.obj.Spec
	}
}

// oldMember: the pod belongs to the group's current lifecycle (seen
// before, or created before it ended: after a restart only the time is
// known).
func (e *agEntry) oldMember(pod *v1.Pod) bool {
	_, member := e.members[pod.UID]
	return member || (!e.finished.IsZero() && !pod.CreationTimestamp.Time.After(e.finished))
}

// gone notes a member pod that finished or was deleted; empty: no live
// member is left. The scheduler's pod informer drops finished pods (its
// field selector leaves out Succeeded and Failed ones), so a bound pod that
// goes may have succeeded, failed or been deleted: the writer asks the API
// server which (unsure), never the informer's handler.
func (t *agTracker) gone(group string, pod *v1.Pod, deleted, empty bool) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.groups[group]
	if e == nil || terminalPhase(e.phase) {
		return
	}
	if _, member := e.members[pod.UID]; !member {
		return
	}
	delete(e.members, pod.UID)
	switch {
	case pod.Status.Phase == v1.PodSucceeded:
		e.succeeded[pod.UID] = true
	case pod.Status.Phase == v1.PodFailed:
		e.failedPods[pod.UID] = true
		e.fail("MemberFailed", fmt.Sprintf("member pod %s failed", pod.Name))
	case deleted && pod.Spec.NodeName != "":
		if e.unsure == nil {
			e.unsure = map[types.UID]*v1.Pod{}
		}
		e.unsure[pod.UID] = pod
	}
	e.emptied = empty
	t.changed(e)
}

// settleGone asks the API server how the bound pods that left the informer
// ended: finished (Succeeded, Failed) or deleted while they ran. The
// writer calls it, off the scheduling path.
func (p *HiveSched) settleGone(ctx context.Context, key string, e *agEntry) {
	t := p.ags
	t.mu.Lock()
	var pods []*v1.Pod
	for _, pod := range e.unsure {
		pods = append(pods, pod)
	}
	t.mu.Unlock()
	for _, pod := range pods {
		got, err := p.handle.ClientSet().CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
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
			e.fail("MemberDeleted", fmt.Sprintf("member pod %s was deleted while it ran", pod.Name))
		}
		t.mu.Unlock()
	}
}

// fail records the first failure (a preemption noted before the pods go
// stays the reason).
func (e *agEntry) fail(reason, msg string) {
	if e.failReason == "" {
		e.failReason, e.failMessage = reason, msg
	}
}

// waiting notes why the group waits (PreFilter's one sentence).
func (t *agTracker) waiting(group, reason, msg string, victims []string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entryLocked(group)
	if e.reason == reason && e.message == msg && equality.Semantic.DeepEqual(e.preempting, victims) {
		return
	}
	e.reason, e.message, e.preempting = reason, msg, victims
	t.changed(e)
}

// refuse notes that the group's VC refuses it or its request is invalid.
func (t *agTracker) refuse(group, reason, msg string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entryLocked(group)
	if e.refused == msg && e.reason == reason {
		return
	}
	e.refused, e.reason, e.message = msg, reason, msg
	t.changed(e)
}

// preempted notes that the group's pods are deleted for a preemptor.
func (t *agTracker) preempted(group, by string) {
	t.podsDeleted(group, func(e *agEntry) {
		e.preemptedBy = by
		e.fail("Preempted", fmt.Sprintf("preempted by affinity group %s: its pods are deleted", by))
	})
}

// bindGaveUp notes that the group's partly bound placement was given up
// after binding failures: its bound members are deleted, so this
// lifecycle fails with reason BindFailed (not MemberDeleted); the pods
// its owner creates again start a new one.
func (t *agTracker) bindGaveUp(group, msg string) {
	t.podsDeleted(group, func(e *agEntry) {
		e.fail("BindFailed", msg)
		e.reason, e.message = "BindFailed", msg
	})
}

// podsDeleted records, with note, why the scheduler deletes the pods of a
// live group: the first reason is the lifecycle's failure reason, whatever
// the deletions show later.
func (t *agTracker) podsDeleted(group string, note func(*agEntry)) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.groups[group]
	if e == nil || terminalPhase(e.phase) {
		return
	}
	note(e)
	t.changed(e)
}

// ended says why a pod of the group must not be scheduled: its group's
// lifecycle failed by pending timeout (seed 004). "" if it may be.
func (t *agTracker) ended(group string, pod *v1.Pod) string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.groups[group]
	if e == nil || e.failReason != "PendingTimeout" || !e.oldMember(pod) {
		return ""
	}
	return fmt.Sprintf("affinity group %s is %s (%s): %s; its pods are not scheduled any more (create them again for a new attempt)",
		group, e.phase, e.failReason, e.failMessage)
}

// object notes an AffinityGroup object (the informer).
func (t *agTracker) object(ag *hv1.AffinityGroup, deleted bool) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	key := ag.Namespace + "/" + ag.Name
	if deleted {
		if e := t.groups[key]; e != nil && e.obj != nil && e.obj.UID == ag.UID {
			e.obj = nil
			if terminalPhase(e.phase) {
				delete(t.groups, key)
			}
		}
		return
	}
	e := t.groups[key]
	if e == nil {
		if ag.Status.Phase == hv1.AffinityGroupExpired {
			return // its lifecycle ended before this process
		}
		e = t.entryLocked(key)
		fromStatus(e, ag) // a restarted scheduler continues the lifecycle
	}
	if e.obj != nil && e.obj.UID == ag.UID && e.obj.ResourceVersion == ag.ResourceVersion {
		return
	}
	if e.obj == nil && e.lastWrite.IsZero() && e.phase == hv1.AffinityGroupNew && ag.Status.Phase != "" && ag.Status.Phase != hv1.AffinityGroupExpired {
		// Its pods were seen before its object (a restarted scheduler
		// recovers before its informers run): the lifecycle continues
		// from the status, unless pods created after it ended are a new
		// attempt.
		members := e.members
		fromStatus(e, ag)
		if (terminalPhase(e.phase) || e.failReason != "") && !e.finished.IsZero() {
			newer := map[types.UID]time.Time{}
			for uid, created := range members {
				if created.After(e.finished) {
					newer[uid] = created
				}
			}
			if len(newer) > 0 {
				e.restart()
				members = newer
			}
		}
		e.members = members
	}
	e.obj = ag
	e.explicit = ag.Labels[hv1.LabelManagedBy] != hv1.ManagedByHivesched
	if e.explicit {
		e.spec = &ag.Spec
		e.total = 0
		for _, m := range ag.Spec.Members {
			e.total += int(m.PodNumber)
		}
	}
	t.changed(e)
}

// fromStatus continues a lifecycle from an object's status (after a
// restart): the phase and timestamps. Cells never come from it (recovery
// trusts only signed pod records, docs/affinitygroups.md).
func fromStatus(e *agEntry, ag *hv1.AffinityGroup) {
	st := ag.Status
	if st.Phase != "" {
		e.phase = st.Phase
	}
	at := func(t *metav1.Time) time.Time {
		if t == nil {
			return time.Time{}
		}
		return t.Time
	}
	e.admitted, e.firstBound, e.running, e.finished = at(st.AdmittedTime), at(st.FirstBoundTime), at(st.RunningTime), at(st.FinishedTime)
	e.reason, e.message, e.preemptedBy = st.Reason, st.Message, st.PreemptedBy
	if e.phase == hv1.AffinityGroupFailing || e.phase == hv1.AffinityGroupFailed {
		e.failReason, e.failMessage = st.Reason, st.Message
	}
}

// agWriteQPS bounds the AffinityGroup writer's API calls per second (burst
// twice that): with many gangs at once, statuses lag rather than load the
// API server that binds pods.
const agWriteQPS = 20

// seedAGs notes every tracked member pod once this process has recovered
// (pods seen before were only indexed).
func (p *HiveSched) seedAGs() {
	if p.ags == nil {
		return
	}
	for _, pod := range p.groups.AllPods() {
		if req, err := p.request(pod); err == nil && req != nil {
			p.ags.seen(pod, req)
		}
	}
}

// --- the writer ---

// agChanged is a non-blocking announcement that groups' statuses may have
// changed (core decisions the tracker did not note).
func (p *HiveSched) agChanged(group string) {
	t := p.ags
	if t == nil {
		return
	}
	t.mu.Lock()
	if e := t.groups[group]; e != nil {
		t.changed(e)
	}
	t.mu.Unlock()
}

// runAGWriter writes AffinityGroup objects in the background, as the VC
// writer does (statuswriter.Run): each group at most once per interval; a
// pass every interval handles the time-driven transitions (pending
// timeout, expiry).
func (p *HiveSched) runAGWriter(ctx context.Context) {
	logger := klog.FromContext(ctx).WithName("affinitygroups")
	statuswriter.Run(ctx, p.statusEvery, p.ags.kick, func(now time.Time, all bool) time.Time {
		return p.writeAGs(ctx, logger, now, all)
	})
}

// agWork is one group's snapshot for a write, taken under the tracker's lock.
type agWork struct {
	key string
	e   *agEntry
}

// writeAGs writes the groups that changed (all: every group, for the
// time-driven transitions) and returns when a held-back one may be written.
func (p *HiveSched) writeAGs(ctx context.Context, logger klog.Logger, now time.Time, all bool) time.Time {
	if !p.recovered.Load() {
		return time.Time{}
	}
	t := p.ags
	t.mu.Lock()
	var work []agWork
	var next time.Time
	for k, e := range t.groups {
		if !e.timeoutAt.IsZero() && !now.Before(e.timeoutAt) {
			// Its pending timeout is due: decided now, not at the next
			// interval (the status write itself stays rate limited).
			work = append(work, agWork{k, e})
			continue
		}
		if !e.dirty && !all {
			continue
		}
		// Written less than an interval ago, or an implicit group's object
		// not due yet (see syncAG): not even looked at (the core's lock is
		// the scheduler's) until it may be written.
		due := e.lastWrite.Add(p.statusEvery)
		if e.lastWrite.IsZero() {
			due = time.Time{}
			if e.obj == nil && !e.explicit && !terminalPhase(e.phase) && e.failReason == "" {
				due = e.seenAt.Add(p.statusEvery)
			}
		}
		if !all && now.Before(due) {
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		work = append(work, agWork{k, e})
	}
	t.mu.Unlock()
	sort.Slice(work, func(i, j int) bool { return work[i].key < work[j].key })
	for _, w := range work {
		due, err := p.syncAG(ctx, logger, w.key, w.e, now)
		if err != nil {
			logger.V(2).Info("writing affinity group", "group", w.key, "err", err)
			continue // dirty stays set: the next pass tries again
		}
		if !due.IsZero() && (next.IsZero() || due.Before(next)) {
			next = due
		}
	}
	// Wake for the next pending timeout (syncAG above may have set one).
	t.mu.Lock()
	for _, e := range t.groups {
		if at := e.timeoutAt; !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	t.mu.Unlock()
	return next
}

// syncAG moves one group along the phase table and writes its object. It
// returns when the group may be written next if the rate limit held it.
func (p *HiveSched) syncAG(ctx context.Context, logger klog.Logger, key string, e *agEntry, now time.Time) (time.Time, error) {
	t := p.ags
	p.settleGone(ctx, key, e)
	coreSt, inCore := p.core.AffinityGroupStatus(key)
	pods := p.groups.Pods(key)
	var timedOut []*v1.Pod

	t.mu.Lock()
	if t.groups[key] != e {
		t.mu.Unlock()
		return time.Time{}, nil
	}
	e.dirty = len(e.unsure) > 0 // still to be asked
	if e.spec == nil {
		t.mu.Unlock()
		return time.Time{}, nil // nothing known of it yet but a name
	}
	if e.emptied && len(pods) == 0 && len(e.unsure) == 0 && len(e.succeeded) == 0 && !terminalPhase(e.phase) {
		e.fail("PodsDeleted", "every member pod was deleted before the group finished")
	}
	obs := phaseObservation{admitted: inCore || !e.admitted.IsZero(), rejected: e.refused != "", total: e.total,
		succeeded: len(e.succeeded), live: len(pods)}
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
		if to := p.pendingTimeout(e); to > 0 && now.Sub(e.admitted) >= to {
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
	if terminalPhase(phase) && phase != hv1.AffinityGroupExpired && now.Sub(e.finished) >= p.agRetention && !keep {
		if to, err := NextPhase(key, phase, PhaseExpire); err == nil {
			phase, expire = to, true
		}
	}
	e.phase = phase
	e.timeoutAt = time.Time{}
	if phase == hv1.AffinityGroupAccepted && e.failReason == "" && obs.bound == 0 && !placed && !e.admitted.IsZero() {
		if to := p.pendingTimeout(e); to > 0 {
			e.timeoutAt = e.admitted.Add(to)
		}
	}
	st := p.agStatus(e, coreSt, inCore, pods, obs, running)
	obj, spec, explicit, owner := e.obj, e.spec, e.explicit, e.owner
	last, seenAt := e.lastWrite, e.seenAt
	t.mu.Unlock()

	if len(timedOut) > 0 {
		p.pendingTimedOut(logger, key, timedOut)
	}
	if !t.writes {
		if expire {
			t.mu.Lock()
			delete(t.groups, key)
			t.mu.Unlock()
		}
		return time.Time{}, nil
	}
	if expire {
		t.mu.Lock()
		delete(t.groups, key)
		t.mu.Unlock()
		if obj != nil && !explicit && len(obj.OwnerReferences) == 0 {
			// Created by the scheduler and owned by nothing: nobody else
			// would ever delete it. An owned one goes with its owner.
			err := p.agClient.HiveschedV1alpha1().AffinityGroups(obj.Namespace).Delete(ctx, obj.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &obj.UID}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return time.Time{}, err
			}
			return time.Time{}, nil
		}
	}
	if obj != nil && agStatusEqual(obj.Status, st) {
		return time.Time{}, nil
	}
	if due := last.Add(p.statusEvery); now.Before(due) && !expire {
		t.mu.Lock()
		e.dirty = true
		t.mu.Unlock()
		return due, nil
	}
	if obj == nil && !explicit && !terminalPhase(st.Phase) {
		// An implicit group's object is created once the group has been
		// known for an interval: a gang that binds at once is then created
		// Running (a create and one status write instead of three writes).
		if due := seenAt.Add(p.statusEvery); now.Before(due) {
			t.markDirty(key, e)
			return due, nil
		}
	}
	ns, name := splitGroup(key)
	client := p.agClient.HiveschedV1alpha1().AffinityGroups(ns)
	if obj == nil {
		if explicit {
			return time.Time{}, nil // the user deleted it: not recreated
		}
		created := &hv1.AffinityGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{hv1.LabelManagedBy: hv1.ManagedByHivesched}}, Spec: *spec}
		if owner != nil {
			created.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		got, err := client.Create(ctx, created, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			got, err = client.Get(ctx, name, metav1.GetOptions{})
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

func (t *agTracker) markDirty(key string, e *agEntry) {
	t.mu.Lock()
	if t.groups[key] == e {
		e.dirty = true
	}
	t.mu.Unlock()
}

// pendingTimeout is the group's pending timeout: its own, else its VC's; 0
// for none. Called with the tracker's lock held.
func (p *HiveSched) pendingTimeout(e *agEntry) time.Duration {
	if e.explicit && e.obj != nil && e.obj.Spec.PendingTimeoutSeconds != nil {
		return time.Duration(*e.obj.Spec.PendingTimeoutSeconds) * time.Second
	}
	if e.spec.PendingTimeoutSeconds != nil {
		return time.Duration(*e.spec.PendingTimeoutSeconds) * time.Second
	}
	if vc := p.vcs.Object(e.spec.VirtualCluster); vc != nil && vc.Spec.PendingTimeoutSeconds != nil {
		return time.Duration(*vc.Spec.PendingTimeoutSeconds) * time.Second
	}
	return 0
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
			if err := p.deletePod(context.Background(), pod); err != nil {
				logger.Error(err, "deleting a timed-out pod", "pod", klog.KObj(pod))
			}
		}
	}
}

// agStatus builds a group's status. Called with the tracker's lock held.
func (p *HiveSched) agStatus(e *agEntry, cs cellcore.AffinityGroupStatus, inCore bool, pods []*v1.Pod, obs phaseObservation, running int) hv1.AffinityGroupStatus {
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
	switch {
	case e.failReason != "":
		st.Reason, st.Message = e.failReason, e.failMessage
	case e.phase == hv1.AffinityGroupRejected:
		st.Reason, st.Message = "Rejected", e.refused
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

func (p *HiveSched) onAG(logger klog.Logger, obj interface{}, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	ag, ok := obj.(*hv1.AffinityGroup)
	if !ok {
		return
	}
	p.ags.object(ag, deleted)
	if !deleted && ag.Labels[hv1.LabelManagedBy] != hv1.ManagedByHivesched {
		// Pods that came before their explicit group are read again.
		p.groupObjectChanged(logger, ag.Namespace, labels.SelectorFromSet(labels.Set{LabelAffinityGroup: ag.Name}))
	}
}
