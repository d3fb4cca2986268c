package hivesched

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// FuzzDecodePlacement: a placement record read back from a pod. Decoding
// either refuses it or yields a record with the fields recovery needs, and
// encoding that record decodes to the same record.
func FuzzDecodePlacement(f *testing.F) {
	g := cellcore.AffinityGroupSpec{Name: "ns/g", VirtualCluster: "vc", Priority: 3, Members: []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 4}}}
	f.Add(newPlacementRecord(g, cellcore.PodPlacement{Node: "n1", LeafCellType: "V100", LeafCellIndices: []int32{4, 5, 6, 7}}, false).encode())
	f.Add(newPlacementRecord(g, cellcore.PodPlacement{Node: "n1", LeafCellIndices: []int32{0}}, true).encode())
	f.Add(`{"group":"x"}`)
	f.Add(`{"group":"ns/g","node":"n","members":[{"podNumber":2147483647,"leafCellNumber":2147483647}],"leafCellIndices":[2147483647]}`)
	f.Add(`[`)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := decodePlacement(s)
		if err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		require.NotEmpty(t, r.Group)
		require.NotEmpty(t, r.Node)
		require.NotEmpty(t, r.Members)
		require.LessOrEqual(t, len(r.Members), maxRecordMembers)
		require.NotEmpty(t, r.LeafCellIndices)
		again, err := decodePlacement(r.encode())
		require.NoError(t, err)
		require.Equal(t, r, again)
	})
}
