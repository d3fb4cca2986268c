package podrequest

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
)

func explicitPod(gpus int64, labels map[string]string) *v1.Pod {
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: labels,
		Annotations: map[string]string{AnnotationPriority: "999", AnnotationGroupMembers: "7"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{"nvidia.com/gpu": q}}}}}}
}

func TestFromAffinityGroup(t *testing.T) {
	ag := &hv1.AffinityGroup{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns"}, Spec: hv1.AffinityGroupSpec{
		VirtualCluster: "vc", Priority: ptr.To[int32](3), LeafCellType: "V100", PinnedCell: "pin", LazyPreemption: true,
		Members: []hv1.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}, {PodNumber: 1, LeafCellNumber: 4}}}}
	group := map[string]string{LabelAffinityGroup: "g"}

	req, err := FromAffinityGroup(explicitPod(4, group), ag, "nvidia.com/gpu")
	require.NoError(t, err)
	require.Equal(t, int32(4), req.LeafCellNumber)
	require.Equal(t, cellcore.AffinityGroupSpec{Name: "ns/g", Namespace: "ns", VirtualCluster: "vc", Priority: 3, LeafCellType: "V100",
		PinnedCellID: "pin", LazyPreemptionEnable: true,
		Members: []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}, {PodNumber: 1, LeafCellNumber: 4}}}, req.Group,
		"the spec is the request; the pod's own annotations (priority 999, 7 members) are not read")
	require.Equal(t, 3, req.TotalPods())

	for name, c := range map[string]struct {
		pod  *v1.Pod
		ag   func(*hv1.AffinityGroup)
		want string
	}{
		"no GPUs":           {explicitPod(0, group), nil, "requests no nvidia.com/gpu"},
		"size not a member": {explicitPod(2, group), nil, "has no member of that size"},
		"VC label disagrees": {explicitPod(8, map[string]string{LabelAffinityGroup: "g", LabelVirtualCluster: "other"}), nil,
			`disagrees with its AffinityGroup ns/g (virtualCluster "vc")`},
		"priority out of range": {explicitPod(8, group), func(a *hv1.AffinityGroup) { a.Spec.Priority = ptr.To[int32](5000) }, "out of range"},
		"no members":            {explicitPod(8, group), func(a *hv1.AffinityGroup) { a.Spec.Members = nil }, "needs spec.virtualCluster and spec.members"},
		"zero pods":             {explicitPod(8, group), func(a *hv1.AffinityGroup) { a.Spec.Members[0].PodNumber = 0 }, "positive podNumber"},
	} {
		t.Run(name, func(t *testing.T) {
			a := ag.DeepCopy()
			if c.ag != nil {
				c.ag(a)
			}
			_, err := FromAffinityGroup(c.pod, a, "nvidia.com/gpu")
			require.ErrorContains(t, err, c.want)
		})
	}
}
