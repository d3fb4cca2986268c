package virtualclusters

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
)

// A pod that names a VC by its HiveD name is told which VirtualCluster
// hived-convert made of it.
func TestAdmitsNamesTheConvertedVC(t *testing.T) {
	r := New(Config{})
	r.vcs["vc1"] = &entry{obj: &hv1.VirtualCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "vc1", Annotations: map[string]string{hv1.AnnotationHivedName: "VC1"}},
		Spec:       hv1.VirtualClusterSpec{AllowedNamespaces: []string{"team"}},
	}}
	require.Empty(t, r.Admits("vc1", "team"))
	require.Equal(t, `virtual cluster "VC1" does not exist: VirtualCluster "vc1" was converted from HiveD's "VC1" (Kubernetes names are lowercase), name it in the pod`, r.Admits("VC1", "team"))
	require.Equal(t, `virtual cluster "vc2" does not exist (kubectl get virtualclusters)`, r.Admits("vc2", "team"))
	require.Contains(t, r.Admits("vc1", "other"), `namespace "other" may not use virtual cluster "vc1"`)
}

func TestCellsSummaryNamesPinnedCells(t *testing.T) {
	spec := func(pinned ...string) hv1.VirtualClusterSpec {
		s := hv1.VirtualClusterSpec{VirtualCells: []hv1.VirtualCellSpec{{CellType: "V100-NODE", CellNumber: 2}, {CellType: "T4-NODE", CellNumber: 0}}}
		for _, id := range pinned {
			s.PinnedCells = append(s.PinnedCells, hv1.PinnedCellSpec{PinnedCellID: id})
		}
		return s
	}
	require.Equal(t, "2xV100-NODE", cellsSummary(spec()))
	require.Equal(t, "2xV100-NODE,pinned:r1-n3", cellsSummary(spec("r1-n3")))
	require.Equal(t, "2xV100-NODE,pinned:a,b,c", cellsSummary(spec("a", "b", "c")))
	require.Equal(t, "2xV100-NODE,pinned:a,b,+3", cellsSummary(spec("a", "b", "c", "d", "e")))
	require.Equal(t, "pinned:a", cellsSummary(hv1.VirtualClusterSpec{PinnedCells: []hv1.PinnedCellSpec{{PinnedCellID: "a"}}}))
}
