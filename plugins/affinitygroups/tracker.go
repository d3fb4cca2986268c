// Package affinitygroups is the scheduler's view of every affinity group's
// lifecycle: what the AffinityGroup objects show (docs/affinitygroups.md).
// The scheduling path and the informers only note facts in the Tracker (a
// map write under its lock and a non-blocking kick); its writer (Run)
// turns them into phases through the phase table (phase.go), fires the
// pending timeout, and creates and writes the objects in the background,
// each group at most once per interval.
package affinitygroups

import (
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/hivesched/hivesched/apis/generated/clientset/versioned"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/podrequest"
	"github.com/hivesched/hivesched/plugins/statuswriter"
)

// Tracker is the scheduler's view of every affinity group's lifecycle. A
// nil *Tracker records nothing (tests of other parts).
//
// With affinityGroupStatus: false the tracker still runs every lifecycle
// (phases, the pending timeout) but writes no object: a pending timeout
// does not depend on the status being written.
type Tracker struct {
	writes    bool // create and write AffinityGroup objects
	client    versioned.Interface
	pods      kubernetes.Interface
	core      *cellcore.Core
	members   Members
	vcs       VirtualClusters
	every     time.Duration
	retention time.Duration
	recovered func() bool
	timedOut  func(logger klog.Logger, group string, pods []*v1.Pod)

	mu     sync.Mutex
	groups map[string]*entry // by group name, namespace/name
	// perNamespace counts the entries of each namespace (at most
	// MaxPerNamespace: one tenant's groups cannot fill the memory);
	// capped logs the namespaces that hit the cap, once each.
	perNamespace map[string]int
	capped       map[string]bool
	kick         statuswriter.Kick
	// timeoutKick wakes the pending-timeout loop when a deadline is set.
	timeoutKick statuswriter.Kick
}

// MaxPerNamespace bounds the groups the tracker follows per namespace. A
// namespace's groups beyond it have no AffinityGroup lifecycle (and no
// pending timeout); they are scheduled as any group is.
const MaxPerNamespace = 2000

// Members are the member pods of the groups (the group index).
type Members interface {
	Pods(group string) []*v1.Pod
}

// VirtualClusters are the VirtualCluster objects (a group's pending
// timeout is its VC's unless it sets its own).
type VirtualClusters interface {
	Object(name string) *hv1.VirtualCluster
}

// Config is what a Tracker works with.
type Config struct {
	// Writes: create and write AffinityGroup objects (the plugin arg
	// affinityGroupStatus), through Client (NewClient).
	Writes bool
	Client versioned.Interface
	// Pods asks the API server how a bound member that left the informer
	// ended (the scheduler's informer drops finished pods).
	Pods            kubernetes.Interface
	Core            *cellcore.Core
	Members         Members
	VirtualClusters VirtualClusters
	// Every is the least time between two writes of one group's object;
	// Retention how long a Completed, Failed or Rejected group is kept
	// before it Expires.
	Every, Retention time.Duration
	// Recovered reports whether this process holds the cluster's
	// allocations: until then it writes nothing.
	Recovered func() bool
	// TimedOut gives up on a group that was pending longer than its
	// pending timeout (pods: its live members); its lifecycle has Failed.
	TimedOut func(logger klog.Logger, group string, pods []*v1.Pod)
}

// New returns a tracker that knows no group yet.
func New(cfg Config) *Tracker {
	return &Tracker{writes: cfg.Writes, client: cfg.Client, pods: cfg.Pods, core: cfg.Core, members: cfg.Members, vcs: cfg.VirtualClusters,
		every: cfg.Every, retention: cfg.Retention, recovered: cfg.Recovered, timedOut: cfg.TimedOut,
		groups: map[string]*entry{}, perNamespace: map[string]int{}, capped: map[string]bool{},
		kick: statuswriter.NewKick(), timeoutKick: statuswriter.NewKick()}
}

type entry struct {
	namespace, name string
	phase           hv1.AffinityGroupPhase
	spec            *hv1.AffinityGroupSpec // the group's request, once a pod or the object gave it
	total           int
	// extras are the live extra pods of an elastic gang (elastic.go):
	// bound or not. They have no AffinityGroup of their own; the gang's
	// MEMBERS column counts them.
	extras map[types.UID]bool
	// replaced: members whose slot an extra took (Replaced): their going
	// is no failure.
	replaced map[types.UID]bool
	// deletedRunning: bound members seen deleted (by their owner, a user)
	// while they ran. None failing the gang whole, the gang ended: when
	// every pod is gone it reads Completed with reason Deleted, not
	// Failed (a member lost while the others ran ends the gang through
	// MemberLost, a failure).
	deletedRunning int
	ended          bool               // every pod of a gang that ran was deleted on purpose
	obj            *hv1.AffinityGroup // the object, as last read or written
	explicit       bool               // created by a user, not by the scheduler
	owner          *metav1.OwnerReference

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
	// unwritable: the API server refused its object as Invalid; it is not
	// tried again (the lifecycle still runs, in memory).
	unwritable bool
	// timeoutAt: when the group's pending timeout fires, while it is
	// Accepted with nothing bound; the writer wakes for it, whatever the
	// write interval.
	timeoutAt time.Time
	seenAt    time.Time // when this process first saw the group
}

func splitGroup(group string) (string, string) {
	ns, name, _ := strings.Cut(group, "/")
	return ns, name
}

// entryLocked returns the group's entry, created New if missing; nil when
// its namespace has MaxPerNamespace groups already.
func (t *Tracker) entryLocked(group string) *entry {
	e := t.groups[group]
	if e == nil {
		ns, name := splitGroup(group)
		if t.perNamespace[ns] >= MaxPerNamespace {
			if !t.capped[ns] {
				t.capped[ns] = true
				klog.Background().Info("namespace has the most affinity groups the scheduler follows; its further groups get no AffinityGroup lifecycle", "namespace", ns, "max", MaxPerNamespace)
			}
			return nil
		}
		e = &entry{namespace: ns, name: name, phase: hv1.AffinityGroupNew, succeeded: map[types.UID]bool{}, failedPods: map[types.UID]bool{},
			members: map[types.UID]time.Time{}, seenAt: time.Now()}
		t.groups[group] = e
		t.perNamespace[ns]++
	}
	return e
}

// forgetLocked drops the group's entry.
func (t *Tracker) forgetLocked(group string) {
	e := t.groups[group]
	if e == nil {
		return
	}
	delete(t.groups, group)
	if t.perNamespace[e.namespace]--; t.perNamespace[e.namespace] <= 0 {
		delete(t.perNamespace, e.namespace)
		delete(t.capped, e.namespace)
	}
}

func (t *Tracker) changed(e *entry) {
	e.dirty = true
	t.kick.Announce()
}

// specOf is the AffinityGroup spec of a pod's request (the implicit form).
func specOf(req *podrequest.Request) *hv1.AffinityGroupSpec {
	s := &hv1.AffinityGroupSpec{VirtualCluster: req.Group.VirtualCluster, Priority: ptr.To(req.Group.Priority),
		LeafCellType: req.Group.LeafCellType, PinnedCell: req.Group.PinnedCellID, LazyPreemption: req.Group.LazyPreemptionEnable,
		WithinTopologyKey: req.Group.WithinTopologyKey}
	for _, m := range req.Group.Members {
		s.Members = append(s.Members, hv1.AffinityGroupMember{PodNumber: m.PodNumber, LeafCellNumber: m.LeafCellNumber})
	}
	if req.CellLessPods > 0 {
		s.Members = append(s.Members, hv1.AffinityGroupMember{PodNumber: req.CellLessPods, LeafCellNumber: 0})
	}
	return s
}

// Seen notes a live member pod (the pod informer). A new pod of a group
// that failed or ended starts a new lifecycle (a Job's retry).
func (t *Tracker) Seen(pod *v1.Pod, req *podrequest.Request) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if gang := req.Group.ExtraOf; gang != "" {
		// An extra pod of an elastic gang: counted on its gang's object.
		if e := t.groups[gang]; e != nil && !terminalPhase(e.phase) {
			if e.extras == nil {
				e.extras = map[types.UID]bool{}
			}
			if bound := pod.Spec.NodeName != ""; e.extras[pod.UID] != bound || !bound {
				e.extras[pod.UID] = bound
				t.changed(e)
			}
		}
		return
	}
	e := t.entryLocked(req.Group.Name)
	if e == nil {
		return
	}
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
func (e *entry) restart() {
	*e = entry{namespace: e.namespace, name: e.name, phase: hv1.AffinityGroupNew, obj: e.obj, explicit: e.explicit, owner: e.owner, spec: e.spec, total: e.total,
		succeeded: map[types.UID]bool{}, failedPods: map[types.UID]bool{}, members: map[types.UID]time.Time{}}
	if e.explicit && e.obj != nil {
		e.spec = &e.obj.Spec
	}
}

// oldMember: the pod belongs to the group's current lifecycle (seen
// before, or created before it ended: after a restart only the time is
// known).
func (e *entry) oldMember(pod *v1.Pod) bool {
	_, member := e.members[pod.UID]
	return member || (!e.finished.IsZero() && !pod.CreationTimestamp.Time.After(e.finished))
}

// Gone notes a member pod that finished or was deleted; empty: no live
// member is left. The scheduler's pod informer drops finished pods (its
// field selector leaves out Succeeded and Failed ones), so a bound pod that
// goes may have succeeded, failed or been deleted: the writer asks the API
// server which (unsure), never the informer's handler.
func (t *Tracker) Gone(group string, pod *v1.Pod, deleted, empty bool) {
	if gang := podrequest.GangOfExtra(group); gang != "" {
		// An extra pod went (the autoscaler took it back, it finished,
		// it was preempted): never a loss of its gang's.
		t.live(gang, func(e *entry) {
			if _, ok := e.extras[pod.UID]; ok {
				delete(e.extras, pod.UID)
				t.changed(e)
			}
		})
		return
	}
	t.live(group, func(e *entry) {
		if _, member := e.members[pod.UID]; !member {
			return
		}
		delete(e.members, pod.UID)
		if e.replaced[pod.UID] {
			delete(e.replaced, pod.UID)
			e.emptied = empty
			t.changed(e)
			return
		}
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
	})
}

// Replaced notes that an extra pod of the elastic gang took the slot of its
// member pod lost (its going, reported by Gone, is no failure).
func (t *Tracker) Replaced(group string, lost *v1.Pod) {
	t.live(group, func(e *entry) {
		if e.replaced == nil {
			e.replaced = map[types.UID]bool{}
		}
		e.replaced[lost.UID] = true
	})
}

// live runs f on the group's entry under the tracker's lock, unless the
// group is unknown or its lifecycle ended.
func (t *Tracker) live(group string, f func(*entry)) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.groups[group]
	if e == nil || terminalPhase(e.phase) {
		return
	}
	f(e)
}

// fail records the first failure (a preemption noted before the pods go
// stays the reason).
func (e *entry) fail(reason, msg string) {
	if e.failReason == "" {
		e.failReason, e.failMessage = reason, msg
	}
}

// Waiting notes why the group waits (PreFilter's one sentence).
func (t *Tracker) Waiting(group, reason, msg string, victims []string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entryLocked(group)
	if e == nil || e.reason == reason && e.message == msg && equality.Semantic.DeepEqual(e.preempting, victims) {
		return
	}
	e.reason, e.message, e.preempting = reason, msg, victims
	t.changed(e)
}

// Refuse notes that the group's VC refuses it or its request is invalid.
func (t *Tracker) Refuse(group, reason, msg string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entryLocked(group)
	if e == nil || e.refused == msg && e.reason == reason {
		return
	}
	e.refused, e.reason, e.message = msg, reason, msg
	t.changed(e)
}

// Preempted notes that the group's pods are deleted for a preemptor.
func (t *Tracker) Preempted(group, by string) {
	t.podsDeleted(group, func(e *entry) {
		e.preemptedBy = by
		e.fail("Preempted", fmt.Sprintf("preempted by affinity group %s: its pods are deleted", by))
	})
}

// BindGaveUp notes that the group's partly bound placement was given up
// after binding failures: its bound members are deleted, so this
// lifecycle fails with reason BindFailed; the pods
// its owner creates again start a new one.
func (t *Tracker) BindGaveUp(group, msg string) {
	t.podsDeleted(group, func(e *entry) {
		e.fail("BindFailed", msg)
		e.reason, e.message = "BindFailed", msg
	})
}

// MemberLost notes that the group lost a member while it ran (to another
// scheduler's preemption, an eviction, the kubelet) and that the scheduler
// deletes its other members, so that it never runs partly: this lifecycle
// fails with reason MemberLost; the pods its owner creates again start a
// new one.
func (t *Tracker) MemberLost(group, msg string) {
	t.podsDeleted(group, func(e *entry) {
		e.fail("MemberLost", msg)
		e.reason, e.message = "MemberLost", msg
	})
}

// podsDeleted records, with note, why the scheduler deletes the pods of a
// live group: the first reason is the lifecycle's failure reason, whatever
// the deletions show later.
func (t *Tracker) podsDeleted(group string, note func(*entry)) {
	t.live(group, func(e *entry) {
		note(e)
		t.changed(e)
	})
}

// Ended says why a pod of the group must not be scheduled: its group's
// lifecycle failed by pending timeout (seed 004). "" if it may be.
func (t *Tracker) Ended(group string, pod *v1.Pod) string {
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

// Object notes an AffinityGroup object (the informer).
func (t *Tracker) Object(ag *hv1.AffinityGroup, deleted bool) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	key := groupKey(ag)
	if deleted {
		if e := t.groups[key]; e != nil && e.obj != nil && e.obj.UID == ag.UID {
			e.obj = nil
			// Ended, or never had a pod (an explicit group deleted before
			// any came): nothing of it is left to follow.
			if terminalPhase(e.phase) || len(e.members) == 0 {
				t.forgetLocked(key)
			}
		}
		return
	}
	e := t.groups[key]
	if e == nil {
		if ag.Status.Phase == hv1.AffinityGroupExpired {
			return // its lifecycle ended before this process
		}
		if e = t.entryLocked(key); e == nil {
			return
		}
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

// groupKey is the group an AffinityGroup object is of: its name, or for
// one the scheduler created under a mapped name (ObjectName), the original.
func groupKey(ag *hv1.AffinityGroup) string {
	if g := ag.Annotations[AnnotationGroupName]; g != "" && ag.Labels[hv1.LabelManagedBy] == hv1.ManagedByHivesched {
		return ag.Namespace + "/" + g
	}
	return ag.Namespace + "/" + ag.Name
}

// fromStatus continues a lifecycle from an object's status (after a
// restart): the phase and timestamps. Cells never come from it (recovery
// trusts only signed pod records, docs/affinitygroups.md).
func fromStatus(e *entry, ag *hv1.AffinityGroup) {
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

// Lifecycle is what the tracker knows of one group's lifecycle: what its
// AffinityGroup object shows (the inspect API and the dashboard read it).
type Lifecycle struct {
	Phase hv1.AffinityGroupPhase
	// Reason and Message: what it waits for (PreFilter's one sentence), or
	// why it ended.
	Reason, Message string
	// Since: the object's creation, else when this process first saw the
	// group.
	Since time.Time
	// VirtualCluster and Priority of its request, once a pod or the object
	// gave it (HasSpec).
	VirtualCluster string
	Priority       int32
	HasSpec        bool
}

// Lifecycles copies every tracked group's lifecycle, by group name (one
// map copy under the tracker's lock).
func (t *Tracker) Lifecycles() map[string]Lifecycle {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]Lifecycle, len(t.groups))
	for name, e := range t.groups {
		l := Lifecycle{Phase: e.phase, Reason: e.reason, Message: e.message, Since: e.seenAt}
		if e.failReason != "" {
			l.Reason, l.Message = e.failReason, e.failMessage
		}
		if e.obj != nil && !e.obj.CreationTimestamp.IsZero() {
			l.Since = e.obj.CreationTimestamp.Time
		}
		if e.spec != nil {
			l.VirtualCluster, l.HasSpec = e.spec.VirtualCluster, true
			if e.spec.Priority != nil {
				l.Priority = *e.spec.Priority
			}
		}
		out[name] = l
	}
	return out
}
