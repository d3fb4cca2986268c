package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A terminating pod keeps its GPUs until it is gone (its containers may still
// run for its grace period, or a finalizer holds it): its cells count, in the
// running scheduler and after a restart, and go Free only when it is deleted.
func TestTerminatingPodsKeepTheirCells(t *testing.T) {
	c := startCluster(t)
	const ns = "term"
	c.createNodes(t, ns, 1, 1, 0)
	c.createNamespace(t, ns)
	c.createVC(t, "term-vc", []string{ns}, "V100-NODE", 1)
	physical := physicalCluster(ns, 1, 1, 0)
	s := c.startScheduler(t, physical)

	old := gangPods(ns, "old", "term-vc", 0, 1, 8)
	old[0].Finalizers = []string{"hivesched.io/test-hold"}
	c.createPods(t, old)
	c.waitBound(t, old, 30*time.Second)
	release := func() {
		_, _ = c.kube.CoreV1().Pods(ns).Patch(context.Background(), old[0].Name, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
	t.Cleanup(release)
	require.NoError(t, c.kube.CoreV1().Pods(ns).Delete(t.Context(), old[0].Name, metav1.DeleteOptions{}))
	require.NotNil(t, c.getPod(t, old[0]).DeletionTimestamp, "the finalizer keeps it terminating")

	// The node's GPUs are still the terminating pod's.
	next := gangPods(ns, "next", "term-vc", 0, 1, 8)
	c.createPods(t, next)
	c.requireUnbound(t, next, 3*time.Second)

	// So they are after a restart: recovery counts the terminating pod.
	s.stop()
	c.startScheduler(t, physical)
	c.requireUnbound(t, next, 3*time.Second)

	// Gone: its cells go Free and the waiting group binds.
	release()
	c.waitGone(t, old, 30*time.Second)
	c.waitBound(t, next, 30*time.Second)
}
