package podrequest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod that asks for GPUs through its device claims and names no VC is
// told so in those words, not as if it requested nvidia.com/gpu.
func TestClaimPodErrorsSayClaims(t *testing.T) {
	r := NewResolver("nvidia.com/gpu", Lookups{Claims: func(*v1.Pod) (int64, bool, error) { return 4, true, nil }})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	_, err := r.Read(pod)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pod asks for 4 GPUs through its device claims (DRA) but names no virtual cluster")
	assert.NotContains(t, err.Error(), "requests 4 nvidia.com/gpu")

	// The same pod naming a VC is read as asking for 4 leaf cells.
	pod.Labels[LabelVirtualCluster] = "vc"
	req, err := r.Read(pod)
	require.NoError(t, err)
	assert.Equal(t, int32(4), req.LeafCellNumber)
}
