package hivesched

import (
	"math"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hivesched/hivesched/plugins/podrequest"
)

// groupIndex tracks the member pods of every affinity group, from the pod
// informer, and the per-pod parse of their requests. It is what PreEnqueue,
// QueueSort and Permit read; it never calls the API server.
type groupIndex struct {
	mu     sync.Mutex
	parsed map[types.UID]parsedPod
	groups map[string]*groupMembers
	// refused: bound pods whose placement record was reported untrusted.
	refused map[types.UID]bool
	// resolver, once set, reads a pod's request from the objects that
	// describe its group as well as from the pod (before: the pod alone).
	resolver *podrequest.Resolver
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
// (specChanged). A pod whose request was invalid is read again when it
// changes, so that fixing a label works.
type parsedPod struct {
	rv     string
	req    *podrequest.Request
	err    error
	fp     string // podrequest.Fingerprint when req was read
	warned bool   // a change of the request was reported
	pinned bool   // req comes from the pod's trusted placement record
}

func newGroupIndex() *groupIndex {
	return &groupIndex{parsed: map[types.UID]parsedPod{}, groups: map[string]*groupMembers{}}
}

func (x *groupIndex) request(pod *v1.Pod, res v1.ResourceName) (*podrequest.Request, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.requestLocked(pod, res)
}

func (x *groupIndex) requestLocked(pod *v1.Pod, res v1.ResourceName) (*podrequest.Request, error) {
	e, ok := x.parsed[pod.UID]
	if ok && e.req != nil && e.err == nil {
		return e.req, nil
	}
	if ok && e.rv == pod.ResourceVersion {
		return e.req, e.err
	}
	var req *podrequest.Request
	var err error
	if x.resolver != nil {
		req, err = x.resolver.Read(pod)
	} else {
		req, err = podrequest.Parse(pod, res)
	}
	rv := pod.ResourceVersion
	if podrequest.IsAwaiting(err) {
		rv = "" // read again next time: it waits for other objects, not for a fix of the pod
	}
	x.parsed[pod.UID] = parsedPod{rv: rv, req: req, err: err, fp: podrequest.Fingerprint(pod)}
	return req, err
}

// forgetRefused drops the cached read of a pod whose request was refused
// or that asked for nothing, so that it is read again (its group's object
// appeared); it reports whether there was one.
func (x *groupIndex) forgetRefused(pod *v1.Pod) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.parsed[pod.UID]
	if ok && e.req != nil && e.err == nil {
		return false
	}
	delete(x.parsed, pod.UID)
	return true
}

// specChanged reports, once per pod, that the labels or annotations that
// make its request changed after it was read.
func (x *groupIndex) specChanged(pod *v1.Pod) bool {
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

// trackRecorded tracks a bound pod as a member of the group its trusted
// placement record names (recovery, adoption), whatever its labels say.
func (x *groupIndex) trackRecorded(pod *v1.Pod, req *podrequest.Request) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e, ok := x.parsed[pod.UID]; ok && e.req != nil && e.req.Group.Name != req.Group.Name {
		x.untrackLocked(pod)
	}
	x.parsed[pod.UID] = parsedPod{rv: pod.ResourceVersion, req: req, fp: podrequest.Fingerprint(pod), pinned: true}
	x.trackLocked(pod, req)
}

// isPinned: the pod's request comes from its trusted placement record.
func (x *groupIndex) isPinned(pod *v1.Pod) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.parsed[pod.UID].pinned
}

// track records a live pod as a member of its group; it returns the group
// and whether this call completed it (every member pod now exists).
func (x *groupIndex) track(pod *v1.Pod, res v1.ResourceName) (string, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	req, err := x.requestLocked(pod, res)
	if err != nil || req == nil {
		return "", false
	}
	return x.trackLocked(pod, req)
}

func (x *groupIndex) trackLocked(pod *v1.Pod, req *podrequest.Request) (string, bool) {
	g := x.groups[req.Group.Name]
	if g == nil {
		g = &groupMembers{pods: map[types.UID]*v1.Pod{}, reserved: map[types.UID]bool{}, created: pod.CreationTimestamp.Time}
		x.groups[req.Group.Name] = g
	}
	_, known := g.pods[pod.UID]
	g.pods[pod.UID] = pod
	if pod.CreationTimestamp.Time.Before(g.created) {
		g.created = pod.CreationTimestamp.Time
	}
	return req.Group.Name, !known && len(g.pods) == req.TotalPods()
}

// untrack forgets a deleted (or finished) pod; it returns the request it was
// tracked with (nil if none) and whether its group has no member left.
func (x *groupIndex) untrack(pod *v1.Pod) (*podrequest.Request, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.untrackLocked(pod)
}

func (x *groupIndex) untrackLocked(pod *v1.Pod) (*podrequest.Request, bool) {
	e, ok := x.parsed[pod.UID]
	delete(x.parsed, pod.UID)
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

func (x *groupIndex) groupOf(pod *v1.Pod) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e, ok := x.parsed[pod.UID]; ok && e.req != nil {
		return e.req.Group.Name
	}
	return ""
}

func (x *groupIndex) memberCount(group string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	if g := x.groups[group]; g != nil {
		return len(g.pods)
	}
	return 0
}

func (x *groupIndex) pods(group string) []*v1.Pod {
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

type sortKey struct {
	priority int64
	created  time.Time
	group    string
	// Of hivesched's groups: the VC and namespace, for the VC's sequencer.
	vc, namespace string
}

func (x *groupIndex) sortKey(pod *v1.Pod, res v1.ResourceName) sortKey {
	x.mu.Lock()
	defer x.mu.Unlock()
	req, err := x.requestLocked(pod, res)
	if err != nil {
		// A pod whose request is refused goes after every valid one: it
		// is only retried to report its error again, and whatever priority
		// it claims (an out-of-range one sorted first) is not its own.
		return sortKey{priority: math.MinInt32, created: pod.CreationTimestamp.Time, group: pod.Namespace + "/" + pod.Name}
	}
	if req == nil {
		k := sortKey{created: pod.CreationTimestamp.Time, group: pod.Namespace + "/" + pod.Name}
		if pod.Spec.Priority != nil {
			k.priority = int64(*pod.Spec.Priority)
		}
		return k
	}
	k := sortKey{priority: int64(req.Group.Priority), created: pod.CreationTimestamp.Time, group: req.Group.Name,
		vc: req.Group.VirtualCluster, namespace: req.Group.Namespace}
	if g := x.groups[req.Group.Name]; g != nil {
		k.created = g.created
	}
	return k
}

func (x *groupIndex) allocated(group string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if g := x.groups[group]; g != nil {
		g.allocatedAt = time.Now()
	}
}

// staleAllocation: the group was placed long ago but none of its members
// got through (reserved or bound) since.
func (x *groupIndex) staleAllocation(group string, timeout time.Duration) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	g := x.groups[group]
	if g == nil || g.allocatedAt.IsZero() || time.Since(g.allocatedAt) < 2*timeout {
		return false
	}
	return g.unused()
}

// unused: no member of the group is reserved or bound, so rolling its
// allocation back takes nothing from a running or binding pod.
func (x *groupIndex) unused(group string) bool {
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

func (x *groupIndex) reserve(group string, pod *v1.Pod) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if g := x.groups[group]; g != nil {
		g.reserved[pod.UID] = true
	}
}

// unreserve reports whether the group has no bound member: then its whole
// allocation must be rolled back.
func (x *groupIndex) unreserve(group string, pod *v1.Pod) bool {
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

// boundCount is how many members of the group the informer shows bound.
func (x *groupIndex) boundCount(group string) int {
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

// unreserveMember drops one member's reservation and leaves the others:
// its binding failed, and it alone retries on the group's cells.
func (x *groupIndex) unreserveMember(group string, pod *v1.Pod) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if g := x.groups[group]; g != nil {
		delete(g.reserved, pod.UID)
	}
}

// clearReserved drops every reservation of the group (its allocation was
// rolled back).
func (x *groupIndex) clearReserved(group string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if g := x.groups[group]; g != nil {
		g.reserved = map[types.UID]bool{}
	}
}

// readyCount is how many members are reserved or bound, of how many.
func (x *groupIndex) readyCount(group string) (int, int) {
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

// markDowngraded notes that the core downgraded the group to opportunistic
// and returns its pods, or nil when no pod of it is known.
func (x *groupIndex) markDowngraded(group string) []*v1.Pod {
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

// mayBeDowngraded: the core reported the group downgraded since its pods
// were first seen (ask the core to be sure).
func (x *groupIndex) mayBeDowngraded(group string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	g := x.groups[group]
	return g != nil && g.downgraded
}

// firstRefusal reports, once per pod, that its placement record was
// refused (so that a pod updated often gets one event, not one per update).
func (x *groupIndex) firstRefusal(pod *v1.Pod) bool {
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

func (x *groupIndex) forgetRefusal(pod *v1.Pod) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.refused, pod.UID)
}
