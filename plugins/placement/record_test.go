package placement

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/internal/podtest"
)

func TestPlacementRecordRoundTrip(t *testing.T) {
	g := cellcore.AffinityGroupSpec{Name: "ns/g", Namespace: "ns", VirtualCluster: "vc", Priority: 3, Members: []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 4}}}
	rec := NewRecord(g, cellcore.PodPlacement{Node: "n1", LeafCellType: "V100", LeafCellIndices: []int32{4, 5, 6, 7}}, false)
	back, err := Decode(rec.Encode())
	require.NoError(t, err)
	require.Equal(t, g, back.Spec())
	require.Equal(t, "n1", back.Node)
	require.False(t, back.Downgraded)
	require.NotContains(t, rec.Encode(), "downgraded", "records of groups never downgraded read as before")
	_, err = Decode(`{"group":"x"}`)
	require.Error(t, err)
	require.Equal(t, "4,5,6,7", indicesString(rec.LeafCellIndices))

	// A lazy downgrade is part of the record; the spec keeps the priority
	// the pods asked for (recovery downgrades it again).
	down := NewRecord(g, cellcore.PodPlacement{Node: "n1", LeafCellIndices: []int32{0}}, true)
	require.Contains(t, down.Encode(), `"downgraded":true`)
	back, err = Decode(down.Encode())
	require.NoError(t, err)
	require.True(t, back.Downgraded)
	require.Equal(t, g, back.Spec())

	// A group held to one domain of a topology key is recovered held to
	// it; records of groups without one read as before.
	require.NotContains(t, rec.Encode(), "withinTopologyKey")
	g.WithinTopologyKey = "topology.kubernetes.io/rack"
	within := NewRecord(g, cellcore.PodPlacement{Node: "n1", LeafCellIndices: []int32{0}}, false)
	back, err = Decode(within.Encode())
	require.NoError(t, err)
	require.Equal(t, g, back.Spec())
	require.Equal(t, g, back.Request().Group)
}

// A signature holds for the pod it was made for only: not for a copy of the
// annotations on another pod, nor for a changed record.
func TestPlacementSignature(t *testing.T) {
	s := &Signer{key: []byte("0123456789abcdef0123456789abcdef")}
	rec := `{"group":"ns/g","virtualCluster":"vc1","priority":0,"members":[{"podNumber":1,"leafCellNumber":8}],"node":"n1","leafCellIndices":[0,1,2,3,4,5,6,7]}`
	mk := func(uid types.UID, ns string) *v1.Pod {
		p := podtest.Pod(nil, map[string]string{Annotation: rec}, 8)
		p.UID, p.Namespace = uid, ns
		return p
	}
	p := mk("uid1", "ns")
	p.Annotations[AnnotationSignature] = s.sign(p, rec)
	require.True(t, s.Verify(p))

	copied := mk("uid2", "ns")
	copied.Annotations[AnnotationSignature] = p.Annotations[AnnotationSignature]
	require.False(t, s.Verify(copied), "a copy on another pod")

	otherNS := mk("uid1", "other")
	otherNS.Annotations[AnnotationSignature] = p.Annotations[AnnotationSignature]
	require.False(t, s.Verify(otherNS), "another namespace")

	changed := p.DeepCopy()
	changed.Annotations[Annotation] = rec[:len(rec)-1] + `,"downgraded":true}`
	require.False(t, s.Verify(changed), "a changed record")

	other := &Signer{key: []byte("fedcba9876543210fedcba9876543210")}
	require.False(t, other.Verify(p), "another key")
	var none *Signer
	require.False(t, none.Verify(p))
	unsigned := mk("uid3", "ns")
	require.False(t, s.Verify(unsigned))
}

// FuzzDecodePlacement: a placement record read back from a pod. Decoding
// either refuses it or yields a record with the fields recovery needs, and
// encoding that record decodes to the same record.
func FuzzDecodePlacement(f *testing.F) {
	g := cellcore.AffinityGroupSpec{Name: "ns/g", VirtualCluster: "vc", Priority: 3, Members: []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 4}}}
	f.Add(NewRecord(g, cellcore.PodPlacement{Node: "n1", LeafCellType: "V100", LeafCellIndices: []int32{4, 5, 6, 7}}, false).Encode())
	f.Add(NewRecord(g, cellcore.PodPlacement{Node: "n1", LeafCellIndices: []int32{0}}, true).Encode())
	cellLess := NewRecord(g, cellcore.PodPlacement{Node: "cpu-0"}, false)
	cellLess.CellLessPods = 1
	f.Add(cellLess.Encode())
	f.Add(`{"group":"ns/g","node":"n","members":[{"podNumber":1,"leafCellNumber":1}],"leafCellIndices":[],"cellLessPods":-1}`)
	f.Add(`{"group":"x"}`)
	f.Add(`{"group":"ns/g","node":"n","members":[{"podNumber":2147483647,"leafCellNumber":2147483647}],"leafCellIndices":[2147483647]}`)
	f.Add(`[`)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Decode(s)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		require.NotEmpty(t, r.Group)
		require.NotEmpty(t, r.Node)
		require.NotEmpty(t, r.Members)
		require.LessOrEqual(t, len(r.Members), maxRecordMembers)
		if len(r.LeafCellIndices) == 0 {
			// A member without cells: its group counts it.
			require.Positive(t, r.CellLessPods)
			require.True(t, r.CellLess())
		}
		require.GreaterOrEqual(t, r.CellLessPods, int32(0))
		require.LessOrEqual(t, r.CellLessPods, int32(cellcore.MaxPodsPerGroup))
		again, err := Decode(r.Encode())
		require.NoError(t, err)
		require.Equal(t, r, again)
	})
}
