// Package groupindex tracks the member pods of every affinity group and
// each pod's request as first read (what PreEnqueue, QueueSort, Permit and
// the informers' handlers ask about a group: its members, which are
// reserved or bound, its queue key). It is fed by the pod informer and
// never calls the API server.
package groupindex

import (
	"math"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hivesched/hivesched/plugins/podrequest"
)

// Index tracks the member pods of every affinity group, from the pod
// informer, and the per-pod parse of their requests. It is what PreEnqueue,
// QueueSort and Permit read; it never calls the API server.
type Index struct {
	resource v1.ResourceName // the leaf cell resource pods request

	mu     sync.Mutex
	parsed map[types.UID]parsedPod
	groups map[string]*groupMembers
	// refused: bound pods whose placement record was reported untrusted.
	refused map[types.UID]bool
	// resolver, once set, reads a pod's request from the objects that
	// describe its group as well as from the pod (before: the pod alone).
	resolver *podrequest.Resolver
	// readSeq numbers the reads and forgets (parsedPod.seq).
	readSeq uint64
	// gated: pods PreEnqueue held back until their request is read.
	gated map[types.UID]bool
	// gangPods: the pods of each framework gang object (NoteGangPod).
	gangPods map[podrequest.GangKey]map[types.UID]*v1.Pod
	// refusedBy: the unbound pods whose request was refused (or read as
	// no request) by the release keys of the objects that can change that
	// (podrequest.ReleaseKeys), and refusedKeys each such pod's keys: an
	// object's event re-reads the pods it concerns (Released), not every
	// pod of its namespace.
	refusedBy   map[string]map[types.UID]*v1.Pod
	refusedKeys map[types.UID][]string
	// releasedAt: the readSeq at which each key was last released, kept
	// while reads are in flight (inflight > 0): a read that started before
	// its key's release and ends refused may have missed the object, and
	// is read again rather than kept (no wake-up is lost).
	releasedAt map[string]uint64
	inflight   int
	// unbound: the tracked pods not bound yet (as last tracked), so that
	// waking the waiting pods (UnboundPods) costs the waiting pods, not
	// every tracked one.
	unbound map[types.UID]*v1.Pod
}

type groupMembers struct {
	pods        map[types.UID]*v1.Pod
	reserved    map[types.UID]bool
	created     time.Time // the oldest member's creation
	allocatedAt time.Time // when the core last placed the group
	// downgraded: the core reported the group lazily preempted (or
	// displaced by its VC) at some point; the core has the final word (a
	// group rolled back is guaranteed again), this is the cheap pre-check.
	downgraded bool
}

// parsedPod is a pod's request as first read. Once a pod has a valid
// request, it is its request for good: the group a pod belongs to keys the
// bookkeeping (which group's cells its deletion frees), and labels and
// annotations can be patched at any time, so a later change must not move
// the pod to another group (the core would never hear of its deletion and
// its cells would leak). Changes are ignored and reported once
// (SpecChanged). A pod whose request was invalid is read again when it
// changes, so that fixing a label works.
type parsedPod struct {
	rv     string
	gen    int64 // the pod's metadata.generation when read (its spec changed)
	req    *podrequest.Request
	err    error
	fp     uint64 // podrequest.Fingerprint when req was read
	warned bool   // a change of the request was reported
	pinned bool   // req comes from the pod's trusted placement record
	// seq orders the reads: the number Request drew when it started
	// reading, so that a read that started earlier never overwrites one
	// that started later (the pod handler and an object handler may read
	// one pod at the same time, each outside the lock).
	seq uint64
}

// New is an empty index of pods that request leaf cell resource resource.
// Until SetResolver it reads pods' requests from the pods alone.
func New(resource v1.ResourceName) *Index {
	return &Index{resource: resource, parsed: map[types.UID]parsedPod{}, groups: map[string]*groupMembers{}, gated: map[types.UID]bool{},
		refusedBy: map[string]map[types.UID]*v1.Pod{}, refusedKeys: map[types.UID][]string{}, releasedAt: map[string]uint64{},
		unbound: map[types.UID]*v1.Pod{}}
}

// SetResolver makes the index read pods' requests through r, from the
// objects that describe their groups as well as from the pods (the
// informers r reads from are set up after the index).
func (x *Index) SetResolver(r *podrequest.Resolver) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.resolver = r
}

// Request returns the pod's request (nil: it asks for no cells), read once
// and, once valid, kept for good. A refused request is read again only when
// what it is read from changed (the pod's hivesched labels and annotations,
// its spec's generation) or when ForgetRefused says its group's object
// appeared: a pod that keeps a refused request cannot make the scheduler
// read it at every update. The read itself runs outside the index's lock.
func (x *Index) Request(pod *v1.Pod) (*podrequest.Request, error) {
	x.mu.Lock()
	if req, err, ok := x.cachedLocked(pod); ok {
		x.mu.Unlock()
		return req, err
	}
	for {
		resolver := x.resolver
		x.readSeq++
		seq := x.readSeq
		x.inflight++
		x.mu.Unlock()

		req, err := x.read(resolver, pod)
		var keys []string
		if err != nil || req == nil {
			keys = podrequest.ReleaseKeys(pod)
		}

		x.mu.Lock()
		x.inflight--
		if (err != nil || req == nil) && x.releasedSinceLocked(keys, seq) {
			// An object that can release it came while it was read: the
			// read may not have seen it. Read again.
			continue
		}
		req, err = x.keepLocked(pod, seq, req, err, keys)
		if x.inflight == 0 {
			clear(x.releasedAt)
		}
		x.mu.Unlock()
		return req, err
	}
}

// keepLocked records a read that started at seq, unless a later one (or a
// forget) came first, and indexes a refused one by its release keys.
func (x *Index) keepLocked(pod *v1.Pod, seq uint64, req *podrequest.Request, err error, keys []string) (*podrequest.Request, error) {
	if e, ok := x.parsed[pod.UID]; ok {
		if e.req != nil && e.err == nil {
			return e.req, nil // read meanwhile, and valid: it stays the pod's
		}
		if e.seq > seq {
			// Read again (or forgotten) after this read started: this
			// one may have seen older objects; it is not kept.
			return req, err
		}
	}
	rv := pod.ResourceVersion
	if podrequest.IsAwaiting(err) {
		rv = "" // read again next time: it waits for other objects, not for a fix of the pod
	}
	x.parsed[pod.UID] = parsedPod{rv: rv, gen: pod.Generation, req: req, err: err, fp: podrequest.Fingerprint(pod), seq: seq}
	x.unindexRefusedLocked(pod.UID)
	if (err != nil || req == nil) && pod.Spec.NodeName == "" && len(keys) > 0 {
		x.refusedKeys[pod.UID] = keys
		for _, k := range keys {
			m := x.refusedBy[k]
			if m == nil {
				m = map[types.UID]*v1.Pod{}
				x.refusedBy[k] = m
			}
			m[pod.UID] = pod
		}
	}
	return req, err
}

// releasedSinceLocked: one of keys was released after the read numbered
// seq started.
func (x *Index) releasedSinceLocked(keys []string, seq uint64) bool {
	for _, k := range keys {
		if x.releasedAt[k] > seq {
			return true
		}
	}
	return false
}

func (x *Index) unindexRefusedLocked(uid types.UID) {
	for _, k := range x.refusedKeys[uid] {
		if m := x.refusedBy[k]; m != nil {
			delete(m, uid)
			if len(m) == 0 {
				delete(x.refusedBy, k)
			}
		}
	}
	delete(x.refusedKeys, uid)
}

// Released notes that the objects keys name appeared or changed and
// returns the pods whose refused request they may release (as last read:
// the caller reads the pods' current versions). A read in flight that
// ends refused on one of these keys is read again (Request), so a pod
// refused before its object existed is always read again: by the caller
// if its refusal was recorded before this call, by its own read if not.
func (x *Index) Released(keys ...string) []*v1.Pod {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.readSeq++
	var out []*v1.Pod
	seen := map[types.UID]bool{}
	for _, k := range keys {
		if x.inflight > 0 {
			x.releasedAt[k] = x.readSeq
		}
		for uid, pod := range x.refusedBy[k] {
			if !seen[uid] {
				seen[uid] = true
				out = append(out, pod)
			}
		}
	}
	return out
}

// DropRefused forgets a deleted pod's place in the refused pods' index.
func (x *Index) DropRefused(uid types.UID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.unindexRefusedLocked(uid)
}

// RefusedCount is how many pods the refused pods' index holds (tests,
// metrics).
func (x *Index) RefusedCount() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.refusedKeys)
}

// Cached returns the pod's request as last read, without reading it (ok
// false: never read, or to be read again). The scheduling queue's callbacks
// (PreEnqueue, QueueSort, queueing hints), which run under the queue's lock,
// use it: nothing is parsed while the queue is locked.
func (x *Index) Cached(pod *v1.Pod) (*podrequest.Request, error, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.cachedLocked(pod)
}

func (x *Index) cachedLocked(pod *v1.Pod) (*podrequest.Request, error, bool) {
	e, ok := x.parsed[pod.UID]
	switch {
	case !ok:
		return nil, nil, false
	case e.req != nil && e.err == nil:
		return e.req, nil, true
	case e.rv == pod.ResourceVersion:
		return e.req, e.err, true
	case e.rv != "" && e.gen == pod.Generation && e.fp == podrequest.Fingerprint(pod):
		// Another version, the same inputs: the read stands, and this
		// version is remembered so that the next look-up compares no more.
		e.rv = pod.ResourceVersion
		x.parsed[pod.UID] = e
		return e.req, e.err, true
	}
	return nil, nil, false
}

// Read reads the pod's request as Request does, but neither takes it from
// nor keeps it in the index.
func (x *Index) Read(pod *v1.Pod) (*podrequest.Request, error) {
	x.mu.Lock()
	resolver := x.resolver
	x.mu.Unlock()
	return x.read(resolver, pod)
}

func (x *Index) read(resolver *podrequest.Resolver, pod *v1.Pod) (*podrequest.Request, error) {
	if resolver != nil {
		return resolver.Read(pod)
	}
	return podrequest.Parse(pod, x.resource)
}

// Gate notes that PreEnqueue held the pod back because its request was not
// read yet; Ungate reports (once) whether it did, so that the reader sends
// it back to the queue.
func (x *Index) Gate(pod *v1.Pod) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.gated[pod.UID] = true
}

// Ungate: see Gate.
func (x *Index) Ungate(pod *v1.Pod) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	was := x.gated[pod.UID]
	delete(x.gated, pod.UID)
	return was
}

// ForgetRefused drops the cached read of a pod whose request was refused
// or that asked for nothing, so that it is read again (its group's object
// appeared); it reports whether there was one.
func (x *Index) ForgetRefused(pod *v1.Pod) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.parsed[pod.UID]
	if ok && e.req != nil && e.err == nil {
		return false
	}
	// A mark, not a deletion: a read that started before this (and saw
	// the objects as they were before) must not be kept when it ends.
	x.readSeq++
	x.parsed[pod.UID] = parsedPod{seq: x.readSeq}
	x.unindexRefusedLocked(pod.UID)
	return true
}

// SpecChanged reports, once per pod, that the labels or annotations that
// make its request changed after it was read.
func (x *Index) SpecChanged(pod *v1.Pod) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.parsed[pod.UID]
	if !ok || e.req == nil || e.err != nil || e.warned || e.rv == pod.ResourceVersion || podrequest.Fingerprint(pod) == e.fp {
		return false
	}
	e.warned = true
	x.parsed[pod.UID] = e
	return true
}

// TrackRecorded tracks a bound pod as a member of the group its trusted
// placement record names (recovery, adoption), whatever its labels say.
func (x *Index) TrackRecorded(pod *v1.Pod, req *podrequest.Request) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e, ok := x.parsed[pod.UID]; ok && e.req != nil && e.req.Group.Name != req.Group.Name {
		x.untrackLocked(pod)
	}
	x.parsed[pod.UID] = parsedPod{rv: pod.ResourceVersion, req: req, fp: podrequest.Fingerprint(pod), pinned: true}
	x.unindexRefusedLocked(pod.UID)
	x.trackLocked(pod, req)
}

// IsPinned: the pod's request comes from its trusted placement record.
func (x *Index) IsPinned(pod *v1.Pod) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.parsed[pod.UID].pinned
}

// Track records a live pod as a member of its group; it returns the group
// and whether this call completed it (every member pod now exists).
func (x *Index) Track(pod *v1.Pod) (string, bool) {
	req, err := x.Request(pod)
	if err != nil || req == nil {
		return "", false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.trackLocked(pod, req)
}

func (x *Index) trackLocked(pod *v1.Pod, req *podrequest.Request) (string, bool) {
	g := x.groups[req.Group.Name]
	if g == nil {
		g = &groupMembers{pods: map[types.UID]*v1.Pod{}, reserved: map[types.UID]bool{}, created: pod.CreationTimestamp.Time}
		x.groups[req.Group.Name] = g
	}
	_, known := g.pods[pod.UID]
	g.pods[pod.UID] = pod
	if pod.Spec.NodeName == "" {
		x.unbound[pod.UID] = pod
	} else {
		delete(x.unbound, pod.UID)
	}
	if pod.CreationTimestamp.Time.Before(g.created) {
		g.created = pod.CreationTimestamp.Time
	}
	return req.Group.Name, !known && len(g.pods) == req.TotalPods()
}

// Untrack forgets a deleted (or finished) pod; it returns the request it was
// tracked with (nil if none) and whether its group has no member left.
func (x *Index) Untrack(pod *v1.Pod) (*podrequest.Request, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.untrackLocked(pod)
}

func (x *Index) untrackLocked(pod *v1.Pod) (*podrequest.Request, bool) {
	e, ok := x.parsed[pod.UID]
	delete(x.parsed, pod.UID)
	delete(x.gated, pod.UID)
	delete(x.unbound, pod.UID)
	x.unindexRefusedLocked(pod.UID)
	if !ok || e.req == nil || e.err != nil {
		return nil, false
	}
	name := e.req.Group.Name
	g := x.groups[name]
	if g == nil {
		return e.req, true
	}
	delete(g.pods, pod.UID)
	delete(g.reserved, pod.UID)
	if len(g.pods) == 0 {
		delete(x.groups, name)
		return e.req, true
	}
	return e.req, false
}

// ReadAgain drops the kept read of a valid, unpinned request so that the
// pod is read again (an elastic gang's unbound extra whose gang lost a
// member of its minimum before it was placed: the extra may be a member
// now). The pod leaves its group; Track reads it and tracks it anew. It
// reports whether there was such a read.
func (x *Index) ReadAgain(pod *v1.Pod) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.parsed[pod.UID]
	if !ok || e.req == nil || e.err != nil || e.pinned {
		return false
	}
	x.untrackLocked(pod)
	x.readSeq++
	x.parsed[pod.UID] = parsedPod{seq: x.readSeq}
	return true
}

// RecordedRole says which part of its gang a pod was read or placed as
// (podrequest.Lookups.RecordedRole): a pod's request, once valid, is kept
// (a bound pod's is the one it was placed with, its record's after a
// restart).
func (x *Index) RecordedRole(pod *v1.Pod) podrequest.Role {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.parsed[pod.UID]
	switch {
	case !ok || e.req == nil:
		return podrequest.RoleNone
	case e.req.Group.ExtraOf != "":
		return podrequest.RoleExtra
	}
	return podrequest.RoleMinimum
}

// GroupOf is the group the pod is tracked in ("" if none).
func (x *Index) GroupOf(pod *v1.Pod) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e, ok := x.parsed[pod.UID]; ok && e.req != nil {
		return e.req.Group.Name
	}
	return ""
}

// MemberCount is how many member pods of the group exist.
func (x *Index) MemberCount(group string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	if g := x.groups[group]; g != nil {
		return len(g.pods)
	}
	return 0
}

// Pods are the group's member pods.
func (x *Index) Pods(group string) []*v1.Pod {
	x.mu.Lock()
	defer x.mu.Unlock()
	g := x.groups[group]
	if g == nil {
		return nil
	}
	out := make([]*v1.Pod, 0, len(g.pods))
	for _, p := range g.pods {
		out = append(out, p)
	}
	return out
}

// SortKey is what the queue orders a pod by.
type SortKey struct {
	Priority int64
	Created  time.Time // the oldest member's creation
	Group    string
	// Of hivesched's groups: the VC and namespace, for the VC's sequencer.
	VC, Namespace string
}

// SortKey is the pod's queue key: its group's priority and age (a plain
// pod's own), and the group's VC.
//
// It reads the request as cached (QueueSort runs under the queue's lock);
// a pod whose request is not read yet has a plain pod's key, which only a
// pod PreEnqueue let through as not hivesched's can have.
func (x *Index) SortKey(pod *v1.Pod) SortKey {
	x.mu.Lock()
	defer x.mu.Unlock()
	req, err, _ := x.cachedLocked(pod)
	if err != nil {
		// A pod whose request is refused goes after every valid one: it
		// is only retried to report its error again, and whatever priority
		// it claims (an out-of-range one sorted first) is not its own.
		return SortKey{Priority: math.MinInt32, Created: pod.CreationTimestamp.Time, Group: pod.Namespace + "/" + pod.Name}
	}
	if req == nil {
		k := SortKey{Created: pod.CreationTimestamp.Time, Group: pod.Namespace + "/" + pod.Name}
		if pod.Spec.Priority != nil {
			k.Priority = int64(*pod.Spec.Priority)
		}
		return k
	}
	k := SortKey{Priority: int64(req.Group.Priority), Created: pod.CreationTimestamp.Time, Group: req.Group.Name,
		VC: req.Group.VirtualCluster, Namespace: req.Group.Namespace}
	if g := x.groups[req.Group.Name]; g != nil {
		k.Created = g.created
	}
	return k
}

// Allocated notes that the core placed the group now.
func (x *Index) Allocated(group string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if g := x.groups[group]; g != nil {
		g.allocatedAt = time.Now()
	}
}

// StaleAllocation: the group was placed long ago but none of its members
// got through (reserved or bound) since.
func (x *Index) StaleAllocation(group string, timeout time.Duration) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	g := x.groups[group]
	if g == nil || g.allocatedAt.IsZero() || time.Since(g.allocatedAt) < 2*timeout {
		return false
	}
	return g.unused()
}

// Unused: no member of the group is reserved or bound, so rolling its
// allocation back takes nothing from a running or binding pod.
func (x *Index) Unused(group string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	g := x.groups[group]
	return g == nil || g.unused()
}

func (g *groupMembers) unused() bool {
	if len(g.reserved) > 0 {
		return false
	}
	for _, p := range g.pods {
		if p.Spec.NodeName != "" {
			return false
		}
	}
	return true
}

// Reserve notes that the member passed its scheduling cycle.
func (x *Index) Reserve(group string, pod *v1.Pod) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if g := x.groups[group]; g != nil {
		g.reserved[pod.UID] = true
	}
}

// Unreserve reports whether the group has no bound member: then its whole
// allocation must be rolled back.
func (x *Index) Unreserve(group string, pod *v1.Pod) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	g := x.groups[group]
	if g == nil {
		return true
	}
	delete(g.reserved, pod.UID)
	for uid, p := range g.pods {
		if p.Spec.NodeName != "" && uid != pod.UID {
			return false
		}
	}
	g.reserved = map[types.UID]bool{}
	return true
}

// BoundCount is how many members of the group the informer shows bound.
func (x *Index) BoundCount(group string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	if g := x.groups[group]; g != nil {
		for _, p := range g.pods {
			if p.Spec.NodeName != "" {
				n++
			}
		}
	}
	return n
}

// UnreserveMember drops one member's reservation and leaves the others:
// its binding failed, and it alone retries on the group's cells.
func (x *Index) UnreserveMember(group string, pod *v1.Pod) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if g := x.groups[group]; g != nil {
		delete(g.reserved, pod.UID)
	}
}

// ClearReserved drops every reservation of the group (its allocation was
// rolled back).
func (x *Index) ClearReserved(group string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if g := x.groups[group]; g != nil {
		g.reserved = map[types.UID]bool{}
	}
}

// ReadyCount is how many members are reserved or bound, of how many.
func (x *Index) ReadyCount(group string) (int, int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	g := x.groups[group]
	if g == nil {
		return 0, 1
	}
	want := 0
	ready := 0
	for uid, p := range g.pods {
		if want == 0 {
			if e, ok := x.parsed[uid]; ok && e.req != nil {
				want = e.req.TotalPods()
			}
		}
		if g.reserved[uid] || p.Spec.NodeName != "" {
			ready++
		}
	}
	return ready, want
}

// MarkDowngraded notes that the core downgraded the group to opportunistic
// and returns its pods, or nil when no pod of it is known.
func (x *Index) MarkDowngraded(group string) []*v1.Pod {
	x.mu.Lock()
	defer x.mu.Unlock()
	g := x.groups[group]
	if g == nil {
		return nil
	}
	g.downgraded = true
	out := make([]*v1.Pod, 0, len(g.pods))
	for _, p := range g.pods {
		out = append(out, p)
	}
	return out
}

// MayBeDowngraded: the core reported the group downgraded since its pods
// were first seen (ask the core to be sure).
func (x *Index) MayBeDowngraded(group string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	g := x.groups[group]
	return g != nil && g.downgraded
}

// FirstRefusal reports, once per pod, that its placement record was
// refused (so that a pod updated often gets one event, not one per update).
func (x *Index) FirstRefusal(pod *v1.Pod) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.refused == nil {
		x.refused = map[types.UID]bool{}
	}
	if x.refused[pod.UID] {
		return false
	}
	x.refused[pod.UID] = true
	return true
}

// ForgetRefusal forgets a deleted pod's refusal.
func (x *Index) ForgetRefusal(pod *v1.Pod) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.refused, pod.UID)
}

// UnboundPods are the tracked pods not bound yet whose request match
// accepts, by namespace/name. It looks at the unbound pods only.
func (x *Index) UnboundPods(match func(*podrequest.Request) bool) map[string]*v1.Pod {
	x.mu.Lock()
	defer x.mu.Unlock()
	pods := map[string]*v1.Pod{}
	for uid, pod := range x.unbound {
		e, ok := x.parsed[uid]
		if !ok || e.req == nil {
			continue
		}
		if match(e.req) {
			pods[pod.Namespace+"/"+pod.Name] = pod
		}
	}
	return pods
}

// AllPods are every tracked pod.
func (x *Index) AllPods() []*v1.Pod {
	x.mu.Lock()
	defer x.mu.Unlock()
	var pods []*v1.Pod
	for _, g := range x.groups {
		for _, pod := range g.pods {
			pods = append(pods, pod)
		}
	}
	return pods
}

// NoteGangPod keeps the pods each framework gang object counts
// (podrequest.GangKeyOf: a PodGroup's, a Workload API pod group's), fed by
// the pod informer before the pod's request is read: a gang's shape (its
// members without leaf cells) is read from its pods (Resolver's GangPods).
// Terminating and finished pods are not counted: a replacement must not
// count twice.
func (x *Index) NoteGangPod(pod *v1.Pod, deleted bool) {
	key, ok := podrequest.GangKeyOf(pod)
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	gone := deleted || pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
	m := x.gangPods[key]
	if gone {
		if m != nil {
			delete(m, pod.UID)
			if len(m) == 0 {
				delete(x.gangPods, key)
			}
		}
		return
	}
	if m == nil {
		if x.gangPods == nil {
			x.gangPods = map[podrequest.GangKey]map[types.UID]*v1.Pod{}
		}
		m = map[types.UID]*v1.Pod{}
		x.gangPods[key] = m
	}
	m[pod.UID] = pod
}

// GangPods are the live pods the gang object key counts, by name.
func (x *Index) GangPods(key podrequest.GangKey) []*v1.Pod {
	x.mu.Lock()
	m := x.gangPods[key]
	out := make([]*v1.Pod, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	x.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
