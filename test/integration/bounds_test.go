package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

// TestBoundedInputs (issue 15): counts a tenant writes are bounded and
// refused where the tenant looks, without booking anything; a victim's own
// grace period does not decide how long its preemptor waits.
func TestBoundedInputs(t *testing.T) {
	c := startCluster(t)
	c.createNodes(t, "bnd", 1, 1, 0)
	c.createNamespace(t, "bnd")
	c.createVC(t, "bnd-vc", []string{"bnd"}, "V100-NODE", 1)
	c.startScheduler(t, physicalCluster("bnd", 1, 1, 0), withVictimGrace(7))

	t.Run("a GPU request beyond int32 and a huge group are refused with an event, nothing booked", func(t *testing.T) {
		huge := gangPods("bnd", "huge", "bnd-vc", 0, 1, 1<<32+4)[0] // truncated to 4 in int32 before
		many := gangPods("bnd", "many", "bnd-vc", 0, 1, 1)[0]
		many.Annotations[hivesched.AnnotationGroupMembers] = "2147483647"
		prio := gangPods("bnd", "prio", "bnd-vc", 0, 1, 1)[0]
		prio.Annotations[hivesched.AnnotationPriority] = "2000000000"
		c.createPods(t, []*v1.Pod{huge, many, prio})
		c.waitEvent(t, huge, "InvalidSchedulingSpec: pod requests 4294967300 nvidia.com/gpu in all", 20*time.Second)
		c.waitEvent(t, many, `InvalidSchedulingSpec: affinity group "bnd/many" has 2147483647 pods`, 20*time.Second)
		c.waitEvent(t, prio, "InvalidSchedulingSpec: priority 2000000000 is out of range", 20*time.Second)
		c.waitVCStatus(t, "bnd-vc", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 0 })
		c.deletePods(t, []*v1.Pod{huge, many, prio})
	})

	t.Run("a victim is deleted with the capped grace period, not its own year", func(t *testing.T) {
		low := gangPods("bnd", "low", "bnd-vc", 1, 1, 8)
		year := int64(365 * 24 * 3600)
		low[0].Spec.TerminationGracePeriodSeconds = &year
		c.createPods(t, low)
		c.waitBound(t, low, 30*time.Second)

		w, err := c.kube.CoreV1().Pods("bnd").Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + low[0].Name})
		require.NoError(t, err)
		defer w.Stop()
		high := gangPods("bnd", "high", "bnd-vc", 5, 1, 8)
		c.createPods(t, high)
		var grace *int64
		deadline := time.After(30 * time.Second)
		for grace == nil {
			select {
			case ev := <-w.ResultChan():
				if p, ok := ev.Object.(*v1.Pod); ok && (ev.Type == watch.Modified || ev.Type == watch.Deleted) && p.DeletionTimestamp != nil {
					grace = p.DeletionGracePeriodSeconds
				}
			case <-deadline:
				t.Fatalf("the victim was not deleted: %s", c.describe(t, low))
			}
		}
		require.Equal(t, int64(7), *grace, "deleted with victimGracePeriodSeconds, not its own %d s", year)
		c.waitBound(t, high, 30*time.Second)
	})
}
