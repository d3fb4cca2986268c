package groupindex

import (
	"fmt"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/internal/podtest"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// A placed group may give its cells back (PostFilter at once, PreFilter once
// the placement is stale) only while none of its members is reserved or
// bound.
func TestGroupIndexUnusedAndStale(t *testing.T) {
	x := New(gpu)
	var pods []*v1.Pod
	for i := 0; i < 2; i++ {
		p := pod(map[string]string{podrequest.LabelVirtualCluster: "vc1", podrequest.LabelAffinityGroup: "g"}, map[string]string{podrequest.AnnotationGroupMembers: "2"}, 4)
		p.Name, p.UID = fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("uid%d", i))
		x.Track(p)
		pods = append(pods, p)
	}
	const group, timeout = "ns/g", time.Second
	require.True(t, x.Unused(group))
	require.False(t, x.StaleAllocation(group, timeout), "never placed")

	x.Allocated(group)
	require.False(t, x.StaleAllocation(group, timeout), "placed just now")
	x.groups[group].allocatedAt = time.Now().Add(-3 * timeout)
	require.True(t, x.StaleAllocation(group, timeout))

	x.Reserve(group, pods[0])
	require.False(t, x.Unused(group), "a member is reserved")
	require.False(t, x.StaleAllocation(group, timeout))
	require.True(t, x.Unreserve(group, pods[0]), "no member bound: roll back")
	require.True(t, x.Unused(group))

	bound := pods[1].DeepCopy()
	bound.Spec.NodeName = "n1"
	x.Track(bound)
	require.False(t, x.Unused(group), "a member is bound")
	require.False(t, x.StaleAllocation(group, timeout))
	require.False(t, x.Unreserve(group, pods[0]), "a member is bound: keep the cells")

	require.True(t, x.Unused("ns/unknown"))
}

// A pod whose request is refused sorts after every valid pod, whatever
// priority it claims (an out-of-range one sorted first).
func TestInvalidPodsSortLast(t *testing.T) {
	x := New(gpu)
	valid := pod(map[string]string{podrequest.LabelVirtualCluster: "vc1"}, map[string]string{podrequest.AnnotationPriority: "-1"}, 1)
	valid.Name, valid.UID = "valid", "u-valid"
	bad := pod(map[string]string{podrequest.LabelVirtualCluster: "vc1"}, map[string]string{podrequest.AnnotationPriority: "2000000000"}, 1)
	bad.Name, bad.UID = "bad", "u-bad"
	bad.Spec.Priority = ptr.To[int32](2000000000)
	plain := pod(nil, nil, 0)
	plain.Name, plain.UID = "plain", "u-plain"
	// The pod informer's handler reads requests; the queue's key only
	// looks them up.
	for _, p := range []*v1.Pod{valid, bad, plain} {
		_, _ = x.Request(p)
	}
	kv, kb, kp := x.SortKey(valid), x.SortKey(bad), x.SortKey(plain)
	require.Greater(t, kv.Priority, kb.Priority, "an opportunistic valid pod goes before an invalid one")
	require.Greater(t, kp.Priority, kb.Priority, "a plain pod goes before an invalid one")
}

// TestRefusedRequestsAreReadOnce (issue 28, 1): a refused request is read
// again only when what it is read from changed, not at every update of the
// pod; the queue's callbacks only look it up, never read.
func TestRefusedRequestsAreReadOnce(t *testing.T) {
	x := New(gpu)
	// A pod of a scheduler-plugins PodGroup while their CRD is not served:
	// refused, and every read asks for the PodGroup lister (counted).
	reads := 0
	x.SetResolver(podrequest.NewResolver(gpu, podrequest.Lookups{PodGroups: func() pglisters.PodGroupLister { reads++; return nil }}))
	bad := pod(map[string]string{podrequest.LabelPodGroup: "pg"}, nil, 1)
	bad.UID, bad.ResourceVersion = "u-bad", "1"
	_, _, read := x.Cached(bad)
	require.False(t, read, "never read")
	_, err := x.Request(bad)
	require.Error(t, err)
	require.Equal(t, 1, reads)

	status := bad.DeepCopy()
	status.ResourceVersion = "2" // a status update: nothing it is read from changed
	_, err = x.Request(status)
	require.Error(t, err)
	require.Equal(t, 1, reads, "not read again")
	_, _, read = x.Cached(status)
	require.True(t, read)

	relabelled := status.DeepCopy()
	relabelled.ResourceVersion = "3"
	relabelled.Labels[podrequest.LabelVirtualCluster] = "vc1"
	_, _, read = x.Cached(relabelled)
	require.False(t, read, "its labels changed: to be read again")
	_, _ = x.Request(relabelled)
	require.Equal(t, 2, reads)

	require.True(t, x.ForgetRefused(relabelled), "its group's object appeared")
	_, _ = x.Request(relabelled)
	require.Equal(t, 3, reads)
}

// A pod's group is read once: relabelling it later neither moves it to
// another group nor loses it from its own (its deletion must free the cells
// of the group it was placed in). A change is reported once.
func TestGroupIndexKeepsAPodsFirstGroup(t *testing.T) {
	x := New(gpu)
	p := pod(map[string]string{podrequest.LabelVirtualCluster: "vc1", podrequest.LabelAffinityGroup: "g"}, map[string]string{podrequest.AnnotationGroupMembers: "1"}, 4)
	p.UID, p.ResourceVersion = "uid1", "1"
	group, complete := x.Track(p)
	require.Equal(t, "ns/g", group)
	require.True(t, complete)

	moved := p.DeepCopy()
	moved.ResourceVersion = "2"
	moved.Labels[podrequest.LabelAffinityGroup] = "other"
	moved.Annotations[podrequest.AnnotationPriority] = "1000"
	req, err := x.Request(moved)
	require.NoError(t, err)
	require.Equal(t, "ns/g", req.Group.Name)
	require.Equal(t, int32(0), req.Group.Priority)
	require.True(t, x.SpecChanged(moved))
	require.False(t, x.SpecChanged(moved), "reported once")
	group, _ = x.Track(moved)
	require.Equal(t, "ns/g", group)
	require.Equal(t, 1, x.MemberCount("ns/g"))
	require.Zero(t, x.MemberCount("ns/other"))

	gone, empty := x.Untrack(moved)
	require.Equal(t, "ns/g", gone.Group.Name)
	require.True(t, empty)
}

// A pod whose request was invalid is read again when it changes: fixing a
// label works.
func TestGroupIndexRereadsAnInvalidRequest(t *testing.T) {
	x := New(gpu)
	p := pod(map[string]string{podrequest.LabelVirtualCluster: "vc1", podrequest.LabelAffinityGroup: "g"}, map[string]string{podrequest.AnnotationGroupMembers: "2x8"}, 4)
	p.UID, p.ResourceVersion = "uid1", "1"
	_, err := x.Request(p)
	require.ErrorContains(t, err, "no member of that size")
	fixed := p.DeepCopy()
	fixed.ResourceVersion = "2"
	fixed.Annotations[podrequest.AnnotationGroupMembers] = "2"
	req, err := x.Request(fixed)
	require.NoError(t, err)
	require.Equal(t, int32(4), req.LeafCellNumber)
}

// A pod tracked from its record (recovery) is in the record's group, whatever
// its labels say.
func TestTrackRecordedUsesTheRecordsGroup(t *testing.T) {
	x := New(gpu)
	p := pod(map[string]string{podrequest.LabelVirtualCluster: "vc1", podrequest.LabelAffinityGroup: "relabelled"}, map[string]string{podrequest.AnnotationGroupMembers: "1"}, 8)
	p.UID = "uid1"
	x.Track(p)
	rec := placement.Record{Group: "ns/placed", VirtualCluster: "vc1", Members: []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}},
		Node: "n1", LeafCellIndices: []int32{0, 1, 2, 3, 4, 5, 6, 7}}
	x.TrackRecorded(p, rec.Request())
	require.True(t, x.IsPinned(p))
	require.Equal(t, "ns/placed", x.GroupOf(p))
	require.Zero(t, x.MemberCount("ns/relabelled"))
	require.Equal(t, 1, x.MemberCount("ns/placed"))
}

const gpu = podtest.GPU

var pod = podtest.Pod
