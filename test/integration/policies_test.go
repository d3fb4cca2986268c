package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

// createPolicyVC creates a VC of n V100 nodes open to every namespace, with
// the policies set.
func (c *cluster) createPolicyVC(t *testing.T, name string, nodes int32, set func(*hv1.VirtualClusterSpec)) {
	vc := &hv1.VirtualCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: hv1.VirtualClusterSpec{AllowedNamespaces: []string{"*"},
		VirtualCells: []hv1.VirtualCellSpec{{CellType: "V100-NODE", CellNumber: nodes}}}}
	set(&vc.Spec)
	_, err := c.vc.HiveschedV1alpha1().VirtualClusters().Create(t.Context(), vc, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.vc.HiveschedV1alpha1().VirtualClusters().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// job is a one-pod group of gpus GPUs.
func job(ns, name, vc string, gpus int64) []*v1.Pod {
	p := gangPods(ns, name, vc, 0, 1, gpus)
	delete(p[0].Annotations, hivesched.AnnotationPriority)
	return p
}

// firstBound waits until one of the pods is bound and returns it; the rest
// must stay unbound (only one fits).
func (c *cluster) firstBound(t *testing.T, pods ...*v1.Pod) string {
	var bound []string
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		bound = bound[:0]
		for _, p := range pods {
			got, err := c.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err == nil && got.Spec.NodeName != "" {
				bound = append(bound, p.Namespace+"/"+p.Name)
			}
		}
		return len(bound) > 0, nil
	})
	require.NoError(t, err, "none bound: %s", c.describe(t, pods))
	require.Len(t, bound, 1, "only one fits")
	return bound[0]
}

// Per-VC policies on a real API server (issue 11): namespace limits and
// priorities, each sequencer's order (a LIFO and a FIFO VC side by side in
// the one queue, DRF across namespaces), and the Spread selector.
func TestPolicies(t *testing.T) {
	c := startCluster(t)
	const prefix = "pol"
	c.createNodes(t, prefix, 5, 2, 0)
	for _, ns := range []string{"pol-a", "pol-b", "pol-c"} {
		c.createNamespace(t, ns)
	}
	c.createPolicyVC(t, "pol-limits", 2, func(s *hv1.VirtualClusterSpec) {
		s.Limits = []hv1.NamespaceLimits{
			{Namespace: "pol-a", MaxRunningGroups: ptr.To[int32](1), MaxPriority: ptr.To[int32](50)},
			{Namespace: "pol-c", MaxLeafCells: ptr.To[int32](4), MaxGroupLeafCells: ptr.To[int32](2)},
		}
	})
	c.createPolicyVC(t, "pol-lifo", 1, func(s *hv1.VirtualClusterSpec) { s.Sequencer = hv1.SequencerPriorityLIFO })
	c.createPolicyVC(t, "pol-fifo", 1, func(s *hv1.VirtualClusterSpec) {})
	c.createPolicyVC(t, "pol-drf", 2, func(s *hv1.VirtualClusterSpec) { s.Sequencer = hv1.SequencerDRF })
	c.createPolicyVC(t, "pol-spread", 2, func(s *hv1.VirtualClusterSpec) { s.Selector = hv1.SelectorSpread })
	// A pinned node stays bound to its VC whatever runs on it: its sockets
	// and switches are equally good cells for a 2-GPU job.
	c.createPinnedVC(t, "pol-rr", []string{"*"}, []string{"pol-pin"})
	_, err := c.vc.HiveschedV1alpha1().VirtualClusters().Patch(t.Context(), "pol-rr", types.MergePatchType, []byte(`{"spec":{"selector":"RoundRobin"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	c.startScheduler(t, withPinned(physicalCluster(prefix, 5, 2, 0), 4, 1, "pol-pin"))

	t.Run("limits", func(t *testing.T) {
		// Priority above the namespace's maximum: explicit, or from the
		// pod's PriorityClass value.
		hi := gangPods("pol-a", "hi", "pol-limits", 60, 1, 1)
		c.createPods(t, hi)
		c.waitEvent(t, hi[0], "InvalidSchedulingSpec: affinity group \"pol-a/hi\": priority 60 is above the highest priority namespace pol-a may use in virtual cluster \"pol-limits\" (maxPriority 50)", 30*time.Second)
		pc := job("pol-a", "pc", "pol-limits", 1)
		pc[0].Spec.Priority = ptr.To[int32](100)
		c.createPods(t, pc)
		c.waitEvent(t, pc[0], "priority 100 is above the highest priority namespace pol-a may use", 30*time.Second)
		// Another namespace has no limit.
		other := gangPods("pol-b", "hi", "pol-limits", 60, 1, 1)
		c.createPods(t, other)
		c.waitBound(t, other, 30*time.Second)
		// One running group at a time for pol-a.
		g1, g2 := job("pol-a", "g1", "pol-limits", 1), job("pol-a", "g2", "pol-limits", 1)
		c.createPods(t, g1)
		c.waitBound(t, g1, 30*time.Second)
		c.createPods(t, g2)
		msg := c.failedScheduling(t, g2[0], "maxRunningGroups 1", 30*time.Second)
		require.Contains(t, msg, "namespace pol-a already runs 1 affinity groups in virtual cluster \"pol-limits\"")
		c.deletePods(t, g1)
		c.waitBound(t, g2, 30*time.Second)
		// pol-c: groups of 2 GPUs at most, 4 GPUs in all.
		big := job("pol-c", "big", "pol-limits", 3)
		c.createPods(t, big)
		c.waitEvent(t, big[0], "asks for 3 leaf cells in all, more than one group of namespace pol-c may have in virtual cluster \"pol-limits\" (maxGroupLeafCells 2)", 30*time.Second)
		c1, c2, c3 := job("pol-c", "c1", "pol-limits", 2), job("pol-c", "c2", "pol-limits", 2), job("pol-c", "c3", "pol-limits", 1)
		c.createPods(t, append(c1, c2...))
		c.waitBound(t, append(c1, c2...), 30*time.Second)
		c.createPods(t, c3)
		c.failedScheduling(t, c3[0], "namespace pol-c holds 4 leaf cells in virtual cluster \"pol-limits\" and the group needs 1 more, above its limit (maxLeafCells 4)", 30*time.Second)
		c.deletePods(t, c1)
		c.waitBound(t, c3, 30*time.Second)
		c.deletePods(t, append(append(c2, c3...), g2...))
	})

	t.Run("RoundRobin", func(t *testing.T) {
		// Packing puts each 2-GPU job on the same switch of the pinned
		// node (devices 0,1); RoundRobin rotates among equally free ones.
		seen := map[string]bool{}
		for i := 0; i < 3; i++ {
			j := job("pol-b", fmt.Sprintf("rr%d", i), "pol-rr", 2)
			j[0].Annotations[hivesched.AnnotationPinnedCell] = "pol-pin"
			c.createPods(t, j)
			c.waitBound(t, j, 30*time.Second)
			running := c.fresh(t, j)
			seen[running[0].Annotations[hivesched.AnnotationLeafCellIndices]] = true
			c.deletePods(t, j)
			c.waitGone(t, running, 30*time.Second)
		}
		require.Greater(t, len(seen), 1, "device indices used: %v", seen)
	})

	// Blocks each one-node VC with a running job, queues three jobs in each a
	// second apart, and twice: lets them all fall out of backoff, frees the
	// nodes, and notes which job the one queue took in each VC.
	order := func(t *testing.T, vcs ...string) map[string][]string {
		const ns = "pol-c"
		waiting := map[string][]*v1.Pod{}
		for _, vc := range vcs {
			blocker := job(ns, vc+"-blocker", vc, 8)
			c.createPods(t, blocker)
			c.waitBound(t, blocker, 30*time.Second)
		}
		for i := 1; i <= 3; i++ {
			for _, vc := range vcs {
				j := job(ns, fmt.Sprintf("%s-j%d", vc, i), vc, 8)
				c.createPods(t, j)
				waiting[vc] = append(waiting[vc], j[0])
			}
			time.Sleep(1100 * time.Millisecond) // creation times are in seconds
		}
		for _, vc := range vcs {
			for _, p := range waiting[vc] {
				c.failedScheduling(t, p, "affinity group", 30*time.Second)
			}
		}
		// Before the VCs' cells free up, every waiting pod must be out of
		// its backoff (kube-scheduler's longest is 10 s): the freeing moves
		// them to the active queue together, and the queue's order alone
		// decides which goes first. (A pod still backing off would come
		// later whatever its key.)
		free := make([]*v1.Pod, 0, len(vcs))
		for _, vc := range vcs {
			free = append(free, job(ns, vc+"-blocker", vc, 8)...)
		}
		got := map[string][]string{}
		for round := 0; round < 2; round++ {
			time.Sleep(11 * time.Second)
			c.deletePods(t, free)
			free = free[:0]
			for _, vc := range vcs {
				first := c.firstBound(t, waiting[vc]...)
				got[vc] = append(got[vc], strings.TrimPrefix(first, ns+"/"+vc+"-"))
				for i, p := range waiting[vc] {
					if p.Namespace+"/"+p.Name == first {
						free = append(free, p)
						waiting[vc] = append(waiting[vc][:i], waiting[vc][i+1:]...)
						break
					}
				}
			}
		}
		c.deletePods(t, free)
		for _, vc := range vcs {
			c.deletePods(t, waiting[vc])
		}
		return got
	}
	t.Run("sequencers", func(t *testing.T) {
		got := order(t, "pol-lifo", "pol-fifo")
		require.Equal(t, []string{"j1-0", "j2-0"}, got["pol-fifo"], "FIFO: oldest first")
		require.Equal(t, []string{"j3-0", "j2-0"}, got["pol-lifo"], "LIFO: newest first, in the same queue")
	})

	t.Run("DRF", func(t *testing.T) {
		// pol-a holds half the VC, pol-c the other half (the blocker).
		heavy := job("pol-a", "heavy", "pol-drf", 8)
		blocker := job("pol-c", "drf-blocker", "pol-drf", 8)
		c.createPods(t, heavy)
		c.createPods(t, blocker)
		c.waitBound(t, append(heavy, blocker...), 30*time.Second)
		older := job("pol-a", "older", "pol-drf", 8)
		c.createPods(t, older)
		time.Sleep(1100 * time.Millisecond)
		newer := job("pol-b", "newer", "pol-drf", 8)
		c.createPods(t, newer)
		c.failedScheduling(t, older[0], "affinity group", 30*time.Second)
		c.failedScheduling(t, newer[0], "affinity group", 30*time.Second)
		time.Sleep(11 * time.Second) // both out of backoff (see order)
		c.deletePods(t, blocker)
		require.Equal(t, "pol-b/newer-0", c.firstBound(t, older[0], newer[0]), "the namespace using less of the VC goes first")
	})

	t.Run("Spread", func(t *testing.T) {
		// Two replicas of one group never share a node.
		rep := gangPods("pol-b", "replicas", "pol-spread", 0, 2, 1)
		c.createPods(t, rep)
		nodes := c.waitBound(t, rep, 30*time.Second)
		require.NotEqual(t, nodes[0], nodes[1])
		c.deletePods(t, rep)
		// Nor two groups that share a spread key.
		a, b := job("pol-b", "web-a", "pol-spread", 1), job("pol-b", "web-b", "pol-spread", 1)
		a[0].Labels[hivesched.LabelSpreadKey] = "web"
		b[0].Labels[hivesched.LabelSpreadKey] = "web"
		c.createPods(t, a)
		na := c.waitBound(t, a, 30*time.Second)
		c.createPods(t, b)
		nb := c.waitBound(t, b, 30*time.Second)
		require.NotEqual(t, na[0], nb[0])
	})
}
