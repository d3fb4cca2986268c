package hivesched

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
)

// A pod that names a VC by its HiveD name is told which VirtualCluster
// hived-convert made of it.
func TestAdmitsNamesTheConvertedVC(t *testing.T) {
	r := newVCRegistry()
	r.vcs["vc1"] = &vcEntry{obj: &hv1.VirtualCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "vc1", Annotations: map[string]string{hv1.AnnotationHivedName: "VC1"}},
		Spec:       hv1.VirtualClusterSpec{AllowedNamespaces: []string{"team"}},
	}}
	require.Empty(t, r.admits("vc1", "team"))
	require.Equal(t, `virtual cluster "VC1" does not exist: VirtualCluster "vc1" was converted from HiveD's "VC1" (Kubernetes names are lowercase), name it in the pod`, r.admits("VC1", "team"))
	require.Equal(t, `virtual cluster "vc2" does not exist (kubectl get virtualclusters)`, r.admits("vc2", "team"))
	require.Contains(t, r.admits("vc1", "other"), `namespace "other" may not use virtual cluster "vc1"`)
}
