// Package podtest builds the pods the plugin packages' tests ask about.
package podtest

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GPU is the leaf cell resource of the tests.
const GPU = v1.ResourceName("nvidia.com/gpu")

// Pod is pod p0 of namespace ns with labels and annotations, whose one
// container asks for gpus of GPU (as a limit, as users write it), none if 0.
func Pod(labels, ann map[string]string, gpus int64) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p0", Namespace: "ns", Labels: labels, Annotations: ann},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	if gpus > 0 {
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{GPU: *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return p
}
