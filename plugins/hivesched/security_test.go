package hivesched

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/placement"
)

// A pod's group is read once: relabelling it later neither moves it to
// another group nor loses it from its own (its deletion must free the cells
// of the group it was placed in). A change is reported once.
func TestGroupIndexKeepsAPodsFirstGroup(t *testing.T) {
	x := newGroupIndex()
	p := pod(map[string]string{LabelVirtualCluster: "vc1", LabelAffinityGroup: "g"}, map[string]string{AnnotationGroupMembers: "1"}, 4)
	p.UID, p.ResourceVersion = "uid1", "1"
	group, complete := x.track(p, gpu)
	require.Equal(t, "ns/g", group)
	require.True(t, complete)

	moved := p.DeepCopy()
	moved.ResourceVersion = "2"
	moved.Labels[LabelAffinityGroup] = "other"
	moved.Annotations[AnnotationPriority] = "1000"
	req, err := x.request(moved, gpu)
	require.NoError(t, err)
	require.Equal(t, "ns/g", req.Group.Name)
	require.Equal(t, int32(0), req.Group.Priority)
	require.True(t, x.specChanged(moved))
	require.False(t, x.specChanged(moved), "reported once")
	group, _ = x.track(moved, gpu)
	require.Equal(t, "ns/g", group)
	require.Equal(t, 1, x.memberCount("ns/g"))
	require.Zero(t, x.memberCount("ns/other"))

	gone, empty := x.untrack(moved)
	require.Equal(t, "ns/g", gone.Group.Name)
	require.True(t, empty)
}

// A pod whose request was invalid is read again when it changes: fixing a
// label works.
func TestGroupIndexRereadsAnInvalidRequest(t *testing.T) {
	x := newGroupIndex()
	p := pod(map[string]string{LabelVirtualCluster: "vc1", LabelAffinityGroup: "g"}, map[string]string{AnnotationGroupMembers: "2x8"}, 4)
	p.UID, p.ResourceVersion = "uid1", "1"
	_, err := x.request(p, gpu)
	require.ErrorContains(t, err, "no member of that size")
	fixed := p.DeepCopy()
	fixed.ResourceVersion = "2"
	fixed.Annotations[AnnotationGroupMembers] = "2"
	req, err := x.request(fixed, gpu)
	require.NoError(t, err)
	require.Equal(t, int32(4), req.LeafCellNumber)
}

// A pod tracked from its record (recovery) is in the record's group, whatever
// its labels say.
func TestTrackRecordedUsesTheRecordsGroup(t *testing.T) {
	x := newGroupIndex()
	p := pod(map[string]string{LabelVirtualCluster: "vc1", LabelAffinityGroup: "relabelled"}, map[string]string{AnnotationGroupMembers: "1"}, 8)
	p.UID = "uid1"
	x.track(p, gpu)
	rec := placement.Record{Group: "ns/placed", VirtualCluster: "vc1", Members: []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}},
		Node: "n1", LeafCellIndices: []int32{0, 1, 2, 3, 4, 5, 6, 7}}
	x.trackRecorded(p, rec.Request())
	require.True(t, x.isPinned(p))
	require.Equal(t, "ns/placed", x.groupOf(p))
	require.Zero(t, x.memberCount("ns/relabelled"))
	require.Equal(t, 1, x.memberCount("ns/placed"))
}
