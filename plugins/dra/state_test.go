package dra

import (
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/dra/dratest"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// fakeManager is the shared DRA manager's part State uses: its claims
// (the assume cache) and allocations in flight.
type fakeManager struct {
	fwk.SharedDRAManager
	tracker *fakeTracker
}

func (m fakeManager) ResourceClaims() fwk.ResourceClaimTracker { return m.tracker }
func (m fakeManager) DeviceClasses() fwk.DeviceClassLister     { return classes{} }

type fakeTracker struct {
	fwk.ResourceClaimTracker
	claims   []*resourceapi.ResourceClaim
	inFlight map[types.UID]*resourceapi.ResourceClaim
}

func (t *fakeTracker) Get(ns, name string) (*resourceapi.ResourceClaim, error) {
	return claimsOf(t.claims...)(ns, name)
}

func (t *fakeTracker) SignalClaimPendingAllocation(uid types.UID, c *resourceapi.ResourceClaim) error {
	t.inFlight[uid] = c
	return nil
}

func (t *fakeTracker) MaybeRemoveClaimPendingAllocation(uid types.UID, _ bool) bool {
	_, ok := t.inFlight[uid]
	delete(t.inFlight, uid)
	return ok
}

// newTestState is a State over one node of 8 GPUs, with claims in both the
// assume cache and the informer's store.
func newTestState(t *testing.T, claims ...*resourceapi.ResourceClaim) (*State, *fakeTracker) {
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, c := range claims {
		require.NoError(t, store.Add(c))
	}
	tr := &fakeTracker{claims: claims, inFlight: map[types.UID]*resourceapi.ResourceClaim{}}
	d := NewState(cfg, Inputs{Manager: fakeManager{tracker: tr}, Client: fake.NewClientset(), Claims: resourcelisters.NewResourceClaimLister(store)})
	d.Feed([]*resourceapi.ResourceSlice{dratest.Slice("n0", "V100", 8)}, claims)
	return d, tr
}

// A gone pod's cells wait while its claim holds devices, and go when the
// claim releases them.
func TestStateDefersGonePodsUntilClaimsRelease(t *testing.T) {
	c := allocated(dratest.Claim("ns", "c", 2), "n0", "gpu-1", "gpu-2")
	d, _ := newTestState(t, c)
	p := pod("p")
	p.UID = "p-uid" // the claim is reserved for it
	dratest.UseClaim(p, "c", false)
	require.Equal(t, []cellcore.DeviceRef{{Index: 1}, {Index: 2}}, d.Claimed("n0"))

	require.True(t, d.DeferRelease(p, true))
	nodes, gone := d.ClaimChanged(c, false)
	require.Equal(t, []string{"n0"}, nodes)
	require.Empty(t, gone, "still allocated")

	free := c.DeepCopy()
	free.Status = resourceapi.ResourceClaimStatus{}
	nodes, gone = d.ClaimChanged(free, false)
	require.Equal(t, []string{"n0"}, nodes)
	require.Equal(t, []GonePod{{Pod: p, Deleted: true}}, gone)
	require.Empty(t, d.Claimed("n0"))
	require.False(t, d.DeferRelease(p, true), "nothing held any more")
}

// A claim a pod's request waited for is reported once when it appears.
func TestStateAwaitsUnseenClaims(t *testing.T) {
	d, _ := newTestState(t)
	p := pod("p")
	dratest.UseClaim(p, "late", false)
	_, _, err := d.PodLeaves(p, "nvidia.com/gpu")
	require.True(t, podrequest.IsAwaiting(err), "%v", err)
	late := dratest.Claim("ns", "late", 4)
	require.True(t, d.Appeared(late))
	require.False(t, d.Appeared(late), "once")
	require.False(t, d.Appeared(dratest.Claim("ns", "other", 1)))
}

// A group's devices are in flight from its decision until the plugin says
// its signal is stale.
func TestStateSignalsGroups(t *testing.T) {
	c := dratest.Claim("ns", "c", 2)
	d, tr := newTestState(t, c)
	p := pod("p")
	dratest.UseClaim(p, "c", false)
	d.SignalGroup(klog.Background(), "ns/g", p, []cellcore.PodPlacement{{Node: "n0", LeafCellIndices: []int32{3, 4}}})
	require.Len(t, tr.inFlight, 1)
	for _, sig := range tr.inFlight {
		require.Equal(t, []string{dratest.Driver + "/n0/gpu-3", dratest.Driver + "/n0/gpu-4"}, DeviceIDs(sig.Status.Allocation, ""))
	}
	d.DropStaleSignals(func(string) bool { return false })
	require.Len(t, tr.inFlight, 1)
	d.DropStaleSignals(func(g string) bool { return g == "ns/g" })
	require.Empty(t, tr.inFlight)

	// A pod without GPU claims signals nothing.
	d.SignalGroup(klog.Background(), "ns/h", pod("plain"), []cellcore.PodPlacement{{Node: "n0", LeafCellIndices: []int32{5}}})
	require.Empty(t, tr.inFlight)
}

// arrivingLister is a claim lister whose claim arrives right after its
// first look-up missed it: the informer adds it to its store and runs the
// claim handler (arrived) before the reader that missed it goes on.
type arrivingLister struct {
	resourcelisters.ResourceClaimLister
	store   cache.Indexer
	claim   *resourceapi.ResourceClaim
	arrived func()
}

func (l *arrivingLister) ResourceClaims(ns string) resourcelisters.ResourceClaimNamespaceLister {
	return arrivingNamespaceLister{l, resourcelisters.NewResourceClaimLister(l.store).ResourceClaims(ns)}
}

type arrivingNamespaceLister struct {
	l *arrivingLister
	resourcelisters.ResourceClaimNamespaceLister
}

func (n arrivingNamespaceLister) Get(name string) (*resourceapi.ResourceClaim, error) {
	c, err := n.ResourceClaimNamespaceLister.Get(name)
	if err != nil && n.l.arrived != nil {
		arrived := n.l.arrived
		n.l.arrived = nil
		_ = n.l.store.Add(n.l.claim)
		arrived()
	}
	return c, err
}

// A pod's request that misses its claim just as the claim arrives (the
// claim handler runs between the miss and the mark that the request waits
// for it) does not miss the arrival: the read finds the claim, or the
// handler finds the mark and the pod is read again.
func TestStateClaimArrivingDuringARead(t *testing.T) {
	late := dratest.Claim("ns", "late", 4)
	tr := &fakeTracker{inFlight: map[types.UID]*resourceapi.ResourceClaim{}}
	l := &arrivingLister{store: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}), claim: late}
	d := NewState(cfg, Inputs{Manager: fakeManager{tracker: tr}, Client: fake.NewClientset(), Claims: l})
	appeared := false
	l.arrived = func() { appeared = d.Appeared(late) }
	p := pod("p")
	dratest.UseClaim(p, "late", false)
	n, has, err := d.PodLeaves(p, "nvidia.com/gpu")
	require.False(t, appeared, "the handler ran before the read marked the claim awaited")
	require.NoError(t, err, "so the read itself must see the claim")
	require.True(t, has)
	require.Equal(t, int64(4), n)
}

// A claim the informer's lister has and the manager's claim tracker does
// not hold yet is named: the group's signal, checked by the tracker against
// that claim, would fail (the member that decides waits for it).
func TestStateUntrackedClaims(t *testing.T) {
	c := dratest.Claim("ns", "c", 2)
	d, tr := newTestState(t, c)
	p := pod("p")
	dratest.UseClaim(p, "c", false)
	require.Empty(t, d.Untracked(p), "the tracker holds it")

	tr.claims = nil // the informer's handlers have run, not the tracker's yet
	require.True(t, d.HasGPUClaims(p), "read through the lister")
	require.Equal(t, "ns/c", d.Untracked(p))

	tr.claims = []*resourceapi.ResourceClaim{c}
	require.Empty(t, d.Untracked(p))
	require.Empty(t, d.Untracked(pod("plain")), "no GPU claims")
}

// A record is trusted only if it lists every GPU claim of the pod with the
// devices the claim holds, reserved for the pod.
func TestStateCheckRecord(t *testing.T) {
	c := allocated(dratest.Claim("ns", "c", 2), "n0", "gpu-1", "gpu-2")
	d, _ := newTestState(t, c)
	p := pod("p")
	p.UID = "p-uid"
	dratest.UseClaim(p, "c", false)
	rec := []placement.ClaimRecord{{Name: "c", UID: string(c.UID), Devices: DeviceIDs(c.Status.Allocation, "")}}
	require.NoError(t, d.CheckRecord(p, rec))
	require.ErrorContains(t, d.CheckRecord(p, nil), "which its placement record does not list")
	other := []placement.ClaimRecord{{Name: "c", UID: string(c.UID), Devices: []string{"x"}}}
	require.ErrorContains(t, d.CheckRecord(p, other), "not the x hivesched allocated")
	p.UID = "q-uid"
	require.ErrorContains(t, d.CheckRecord(p, rec), "is not reserved for it")

	// A recovery from the API server reads the claims it listed.
	d.ReadFromList([]*resourceapi.ResourceClaim{})
	err := d.CheckRecord(p, rec)
	require.ErrorContains(t, err, "is gone")
	d.ReadFromInformer()
	p.UID = "p-uid"
	require.NoError(t, d.CheckRecord(p, rec))
}
