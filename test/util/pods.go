// Package util holds what the integration and e2e suites share.
package util

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hivesched/hivesched/plugins/hivesched"
)

// GangPods builds the n pods of a native-form gang <group> in namespace ns:
// each asks for gpus nvidia.com/gpu in virtual cluster vc at the given HiveD
// priority, and names schedulerName ("" for the default scheduler).
func GangPods(ns, group, vc string, priority, n int, gpus int64, schedulerName string) []*v1.Pod {
	var out []*v1.Pod
	q := *resource.NewQuantity(gpus, resource.DecimalSI)
	for i := 0; i < n; i++ {
		out = append(out, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-%d", group, i), Namespace: ns,
				Labels:      map[string]string{hivesched.LabelVirtualCluster: vc, hivesched.LabelAffinityGroup: group},
				Annotations: map[string]string{hivesched.AnnotationGroupMembers: fmt.Sprint(n), hivesched.AnnotationPriority: fmt.Sprint(priority)},
			},
			Spec: v1.PodSpec{
				SchedulerName: schedulerName,
				Tolerations:   []v1.Toleration{{Operator: v1.TolerationOpExists}},
				Containers: []v1.Container{{Name: "main", Image: "busybox", Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{"nvidia.com/gpu": q},
					Limits:   v1.ResourceList{"nvidia.com/gpu": q},
				}}},
			},
		})
	}
	return out
}
