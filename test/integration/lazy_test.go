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
	"k8s.io/apimachinery/pkg/util/wait"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

// The lazy-preemption report (issue 9) on its cluster: racks r0 and r1 of 4
// nodes with 8 V100 each, r1-n3 pinned for vc-b; vc-a owns one rack, vc-b two
// V100 nodes and the pinned node. vc-a's rack can only be r0 (r1 holds the
// pinned node), so vc-b's nodes are r1-n0..n2, and lazily preempted groups
// of vc-b stay on them.
func lazyCluster(t *testing.T, c *cluster, prefix string) map[string]any {
	c.createNodes(t, prefix, 2, 4, 0)
	c.createNamespace(t, prefix)
	c.createVC(t, prefix+"-vc-a", []string{prefix}, "V100-RACK", 1)
	c.createPinnedVC(t, prefix+"-vc-b", []string{prefix}, []string{prefix + "-pin"}, "V100-NODE", 2)
	return withPinned(physicalCluster(prefix, 2, 4, 0), 1, 3, prefix+"-pin")
}

// lazyPods is a native-form 1x8 job that may be lazily preempted.
func lazyPods(ns, group, vc string, priority int) []*v1.Pod {
	pods := gangPods(ns, group, vc, priority, 1, 8)
	for _, p := range pods {
		p.Annotations[hivesched.AnnotationLazyPreemption] = "true"
	}
	return pods
}

// hivedPods is a gang in HiveD's annotation: n pods of 8 V100.
func hivedPods(ns, group, vc string, priority, n int, lazy bool) []*v1.Pod {
	var pods []*v1.Pod
	for i := 0; i < n; i++ {
		p := gangPods(ns, group, vc, priority, 1, 8)[0]
		p.Name = fmt.Sprintf("%s-%d", group, i)
		p.Labels, p.Annotations = nil, map[string]string{hivesched.HivedSpecAnnotation: strings.Join([]string{
			"virtualCluster: " + vc, fmt.Sprintf("priority: %d", priority), "leafCellType: V100", "leafCellNumber: 8",
			fmt.Sprintf("lazyPreemptionEnable: %v", lazy),
			"affinityGroup:", "  name: " + group, "  members:", fmt.Sprintf("  - podNumber: %d", n), "    leafCellNumber: 8"}, "\n")}
		pods = append(pods, p)
	}
	return pods
}

// fresh returns the pods as the API server has them now (UIDs, nodes).
func (c *cluster) fresh(t *testing.T, pods []*v1.Pod) []*v1.Pod {
	out := make([]*v1.Pod, len(pods))
	for i, p := range pods {
		out[i] = c.getPod(t, p)
	}
	return out
}

// requireRunning checks that the pods are the same pods, bound to the same
// nodes, and not on their way out.
func (c *cluster) requireRunning(t *testing.T, pods []*v1.Pod) {
	for _, p := range pods {
		got, err := c.kube.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{})
		require.NoError(t, err, "pod %s is gone", p.Name)
		require.Equal(t, p.UID, got.UID, "pod %s was replaced", p.Name)
		require.Nil(t, got.DeletionTimestamp, "pod %s is being deleted", p.Name)
		require.Equal(t, p.Spec.NodeName, got.Spec.NodeName)
	}
}

// waitDowngradeRecord waits until every pod's persisted placement says its
// group was downgraded.
func (c *cluster) waitDowngradeRecord(t *testing.T, pods []*v1.Pod) {
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			got, err := c.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			last = got.Annotations[hivesched.AnnotationPlacement]
			if !strings.Contains(last, `"downgraded":true`) {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "placement record not updated: %s", last)
}

// requireRecord checks whether the pods' persisted placement says downgraded.
func (c *cluster) requireRecord(t *testing.T, pods []*v1.Pod, downgraded bool) {
	for _, p := range pods {
		rec := c.getPod(t, p).Annotations[hivesched.AnnotationPlacement]
		require.NotEmpty(t, rec)
		require.Equal(t, downgraded, strings.Contains(rec, `"downgraded":true`), "pod %s: %s", p.Name, rec)
	}
}

// lazyEvent returns the LazilyPreempted event text on the pod that names
// who, or "".
func (c *cluster) lazyEvent(t *testing.T, p *v1.Pod, who string) string {
	for _, e := range c.events(t, p) {
		if strings.HasPrefix(e, hivesched.ReasonLazilyPreempted+": ") && strings.Contains(e, who) {
			return e
		}
	}
	return ""
}

// waitLazyEvent waits until one of the groups' pods has a LazilyPreempted
// event naming who and returns that group's index.
func (c *cluster) waitLazyEvent(t *testing.T, groups [][]*v1.Pod, who string) int {
	found := -1
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		for i, g := range groups {
			if c.lazyEvent(t, g[0], who) != "" {
				found = i
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "no LazilyPreempted event naming %s", who)
	return found
}

// waitOneGone waits until the pods of exactly one of the groups are gone and
// returns its index.
func (c *cluster) waitOneGone(t *testing.T, groups [][]*v1.Pod) int {
	gone := -1
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		n := 0
		for i, g := range groups {
			all := true
			for _, p := range g {
				got, err := c.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
				if err == nil && got.UID == p.UID {
					all = false
				}
			}
			if all {
				gone, n = i, n+1
			}
		}
		return n == 1, nil
	})
	require.NoError(t, err, "want exactly one victim group deleted")
	return gone
}

// waitLazyStatus waits for a VC's status: bound V100 nodes, opportunistic
// and downgraded groups, opportunistic leaf cells.
func (c *cluster) waitLazyStatus(t *testing.T, vc string, bound, opp, downgraded, oppLeaves int32) hv1.VirtualClusterStatus {
	return c.waitVCStatus(t, vc, func(st hv1.VirtualClusterStatus) bool {
		b := int32(-1)
		for _, cell := range st.Cells {
			if cell.CellType == "V100-RACK.V100-NODE" {
				b = cell.BoundCells
			}
		}
		return b == bound && st.OpportunisticGroups == opp && st.DowngradedGroups == downgraded && st.OpportunisticLeafCells == oppLeaves
	})
}

func TestLazyPreemption(t *testing.T) {
	c := startCluster(t)

	t.Run("single jobs: downgraded, kept running, recorded, recovered as opportunistic", func(t *testing.T) {
		const ns = "lza"
		physical := lazyCluster(t, c, ns)
		s := c.startScheduler(t, physical)

		l0 := lazyPods(ns, "l0", "lza-vc-b", 0)
		l1 := lazyPods(ns, "l1", "lza-vc-b", 0)
		c.createPods(t, l0)
		c.waitBound(t, l0, 30*time.Second)
		c.createPods(t, l1)
		c.waitBound(t, l1, 30*time.Second)
		l0, l1 = c.fresh(t, l0), c.fresh(t, l1)
		for _, p := range append(append([]*v1.Pod{}, l0...), l1...) {
			require.Regexp(t, "^lza-r1-n[012]$", p.Spec.NodeName, "vc-a's rack stays whole, the pinned node is vc-b's pinned jobs'")
		}
		c.requireRecord(t, l0, false)
		c.waitLazyStatus(t, "lza-vc-b", 2, 0, 0, 0)

		// h0 needs one of vc-b's nodes: one of the lazy jobs is downgraded
		// and runs on; h0 binds a free node of r1.
		h0 := gangPods(ns, "h0", "lza-vc-b", 5, 1, 8)
		c.createPods(t, h0)
		c.waitBound(t, h0, 30*time.Second)
		d := c.waitLazyEvent(t, [][]*v1.Pod{l0, l1}, "lza/h0")
		down, other := [][]*v1.Pod{l0, l1}[d], [][]*v1.Pod{l0, l1}[1-d]
		ev := c.lazyEvent(t, down[0], "lza/h0")
		t.Logf("event: %s", ev)
		require.Contains(t, ev, "lazily preempted by affinity group lza/h0 (priority 5)")
		require.Contains(t, ev, "now as opportunistic (priority -1), and any guaranteed group may preempt it")
		require.Empty(t, c.lazyEvent(t, other[0], "lazily"), "only one job had to go")
		c.requireRunning(t, append(append([]*v1.Pod{}, l0...), l1...))
		c.waitDowngradeRecord(t, down)
		c.requireRecord(t, other, false)
		c.waitLazyStatus(t, "lza-vc-b", 2, 1, 1, 8)

		// A restart recovers the downgraded job as opportunistic from its
		// record: it does not take back a node of vc-b, which stays with
		// the other lazy job (and h0).
		s.stop()
		s = c.startScheduler(t, physical)
		c.requireRecord(t, down, true)
		c.requireRunning(t, append(append([]*v1.Pod{}, l0...), l1...))
		c.waitLazyStatus(t, "lza-vc-b", 2, 1, 1, 8)

		// h1, after the restart, needs vc-b's other node: the job still
		// guaranteed is the one downgraded (had recovery made the first one
		// guaranteed again, that one would be), and one opportunistic job
		// makes room rather than h1 waiting.
		h1 := gangPods(ns, "h1", "lza-vc-b", 5, 1, 8)
		c.createPods(t, h1)
		c.waitBound(t, h1, 30*time.Second)
		c.waitLazyEvent(t, [][]*v1.Pod{other}, "lza/h1")
		require.Empty(t, c.lazyEvent(t, down[0], "lza/h1"), "the job recovered as opportunistic is not downgraded twice")
		g := c.waitOneGone(t, [][]*v1.Pod{down, other})
		survivor := [][]*v1.Pod{down, other}[1-g]
		c.requireRunning(t, survivor)
		c.waitDowngradeRecord(t, survivor)
		st := c.waitLazyStatus(t, "lza-vc-b", 2, 1, 1, 8)
		require.EqualValues(t, 16, st.UsedLeafCells, "h0 and h1")

		// Restart again: the survivor is recovered as opportunistic.
		s.stop()
		c.startScheduler(t, physical)
		c.requireRecord(t, survivor, true)
		c.requireRunning(t, survivor)
		c.waitLazyStatus(t, "lza-vc-b", 2, 1, 1, 8)

		// vc-b's nodes are both held at priority 5: a further priority-5
		// job waits, and says so in one sentence. The survivor runs outside
		// vc-b's cells, so it is no victim of vc-b's guarantee.
		h2 := gangPods(ns, "h2", "lza-vc-b", 5, 1, 8)
		c.createPods(t, h2)
		c.requireUnbound(t, h2, 2*time.Second)
		msg := c.failedScheduling(t, h2[0], `affinity group "lza/h2"`, 20*time.Second)
		t.Logf("FailedScheduling: %s", msg)
		require.Regexp(t, oneSentence, msg)
		require.Contains(t, msg, `: affinity group "lza/h2" (priority 5) needs 1 pod of 8 V100 in virtual cluster "lza-vc-b": `+
			`of its 16 V100 (2 V100-NODE), 16 are used by groups of priority 5 or higher (lza/h0 and lza/h1) and none is free; `+
			`it binds when enough of those groups finish.`)
		c.requireRunning(t, survivor)
		// As it says: h0 finishes, h2 binds.
		c.deletePods(t, h0)
		c.waitBound(t, h2, 30*time.Second)
		c.requireRunning(t, survivor)
	})

	t.Run("a gang takes both nodes of two lazy jobs (HiveD form)", func(t *testing.T) {
		const ns = "lzb"
		c.startScheduler(t, lazyCluster(t, c, ns))

		l0 := hivedPods(ns, "l0", "lzb-vc-b", 0, 1, true)
		l1 := hivedPods(ns, "l1", "lzb-vc-b", 0, 1, true)
		c.createPods(t, l0)
		c.waitBound(t, l0, 30*time.Second)
		c.createPods(t, l1)
		c.waitBound(t, l1, 30*time.Second)
		l0, l1 = c.fresh(t, l0), c.fresh(t, l1)

		gang := hivedPods(ns, "g", "lzb-vc-b", 5, 2, false)
		c.createPods(t, gang)
		nodes := c.waitBound(t, gang, 30*time.Second)
		require.NotEqual(t, nodes[0], nodes[1])
		for _, n := range nodes {
			require.Regexp(t, "^lzb-r1-n[012]$", n, "within vc-b's nodes: r0 stays whole for vc-a, the pinned node is not for this gang")
		}
		for _, l := range [][]*v1.Pod{l0, l1} {
			ev := c.waitEvent(t, l[0], "lazily preempted by affinity group lzb/g (priority 5)", 20*time.Second)
			t.Logf("%s: %s", l[0].Name, ev)
		}
		// One of them made room (the third node of r1 was free); the other
		// runs on, recorded as downgraded.
		g := c.waitOneGone(t, [][]*v1.Pod{l0, l1})
		survivor := [][]*v1.Pod{l0, l1}[1-g]
		c.requireRunning(t, survivor)
		c.waitDowngradeRecord(t, survivor)
		require.Contains(t, c.getPod(t, survivor[0]).Annotations, hivesched.HivedIsolationAnnotation)
		st := c.waitLazyStatus(t, "lzb-vc-b", 2, 1, 1, 8)
		for _, cell := range st.Cells {
			if cell.CellType == "V100-RACK.V100-NODE" {
				require.EqualValues(t, 2, cell.TotalCells)
				require.EqualValues(t, 2, cell.BoundCells, "vc-b shows 2 of 2 cells bound")
				require.EqualValues(t, 16, cell.UsedLeafCells)
			}
		}
		require.EqualValues(t, 24, st.TotalLeafCells)
		require.EqualValues(t, 16, st.UsedLeafCells)
		require.EqualValues(t, 8, st.FreeLeafCells, "the pinned node")
	})

	t.Run("a VC that shrinks or is deleted downgrades its groups visibly", func(t *testing.T) {
		const ns = "lzc"
		c.createNodes(t, ns, 1, 2, 0)
		c.createNamespace(t, ns)
		c.createVC(t, "lzc-vc", []string{ns}, "V100-NODE", 2)
		c.startScheduler(t, physicalCluster(ns, 1, 2, 0))
		a := gangPods(ns, "a", "lzc-vc", 0, 1, 8)
		b := gangPods(ns, "b", "lzc-vc", 3, 1, 8)
		c.createPods(t, append(append([]*v1.Pod{}, a...), b...))
		c.waitBound(t, a, 30*time.Second)
		c.waitBound(t, b, 30*time.Second)
		a, b = c.fresh(t, a), c.fresh(t, b)

		vc, err := c.vc.HiveschedV1alpha1().VirtualClusters().Get(t.Context(), "lzc-vc", metav1.GetOptions{})
		require.NoError(t, err)
		vc.Spec.VirtualCells[0].CellNumber = 1
		_, err = c.vc.HiveschedV1alpha1().VirtualClusters().Update(t.Context(), vc, metav1.UpdateOptions{})
		require.NoError(t, err)
		// One group no longer fits and runs on; which one is the core's choice.
		d := c.waitLazyEvent(t, [][]*v1.Pod{a, b}, `virtual cluster "lzc-vc" shrank`)
		down, kept := [][]*v1.Pod{a, b}[d], [][]*v1.Pod{a, b}[1-d]
		c.waitDowngradeRecord(t, down)
		c.requireRecord(t, kept, false)
		c.requireRunning(t, append(append([]*v1.Pod{}, a...), b...))
		c.waitVCStatus(t, "lzc-vc", func(st hv1.VirtualClusterStatus) bool {
			return st.OpportunisticGroups == 1 && st.DowngradedGroups == 1 && st.UsedLeafCells == 8 && st.TotalLeafCells == 8
		})

		require.NoError(t, c.vc.HiveschedV1alpha1().VirtualClusters().Delete(t.Context(), "lzc-vc", metav1.DeleteOptions{}))
		c.waitLazyEvent(t, [][]*v1.Pod{kept}, `virtual cluster "lzc-vc" was deleted`)
		c.waitDowngradeRecord(t, kept)
		c.requireRunning(t, append(append([]*v1.Pod{}, a...), b...))
	})
}
