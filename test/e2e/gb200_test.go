package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/test/util"
)

// The GB200-shaped local cluster (issue 45; HIVESCHED_CLUSTER=gb200, make
// e2e-gb200): two NVL72 NVLink domains of 18 4-GPU trays beside three 8-GPU
// H100 nodes; vc-frontier owns a whole domain, vc-labs half of one and two
// H100 nodes (manifests/samples/gb200/).

const cliqueLabel = "nvidia.com/gpu.clique"

var clearGB200Namespaces sync.Once

func setupGB200(t *testing.T) *env {
	e := connect(t, "gb200", "make e2e-gb200")
	clearGB200Namespaces.Do(func() { e.clearNamespaces(t, "frontier", "labs") })
	return e
}

// gb200Gang is a gang of n pods of gpus GB200 each; within asks for one
// NVLink domain.
func gb200Gang(ns, group, vc string, priority, n int, gpus int64, within bool) []*v1.Pod {
	ps := util.GangPods(ns, group, vc, priority, n, gpus, "hivesched")
	for _, p := range ps {
		p.Annotations[hivesched.AnnotationLeafCellType] = "GB200"
		if within {
			p.Annotations[hivesched.AnnotationWithinTopology] = cliqueLabel
		}
	}
	return ps
}

// cliquesOf maps the nodes pods run on to their NVLink domains (the
// nodes' clique label) and counts the pods in each.
func (e *env) cliquesOf(t *testing.T, nodes []string) map[string]int {
	out := map[string]int{}
	for _, n := range nodes {
		node, err := e.kube.CoreV1().Nodes().Get(t.Context(), n, metav1.GetOptions{})
		require.NoError(t, err)
		c := node.Labels[cliqueLabel]
		require.NotEmpty(t, c, "node %s has no %s label: not a GB200 tray", n, cliqueLabel)
		out[c]++
	}
	return out
}

// waitPodEvent waits for an event on pod p whose message contains want.
func (e *env) waitPodEvent(t *testing.T, p *v1.Pod, want string, timeout time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 300*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return strings.Contains(e.podEvents(t, p.Namespace, p.Name), want), nil
	})
	require.NoError(t, err, "no event on %s saying %q; its events:%s", p.Name, want, e.podEvents(t, p.Namespace, p.Name))
}

func TestGB200(t *testing.T) {
	e := setupGB200(t)

	t.Run("bring-up: 36 trays in two cliques and 3 H100 nodes, VCs Active", func(t *testing.T) {
		nodes, err := e.kube.CoreV1().Nodes().List(t.Context(), metav1.ListOptions{LabelSelector: "type=kwok"})
		require.NoError(t, err)
		cliques := map[string]int{}
		h100 := 0
		for _, n := range nodes.Items {
			if c := n.Labels[cliqueLabel]; c != "" {
				cliques[c]++
			} else if n.Labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3" {
				h100++
			}
		}
		require.Len(t, cliques, 2)
		for c, n := range cliques {
			require.Equal(t, 18, n, "clique %s", c)
		}
		require.Equal(t, 3, h100)
		for _, name := range []string{"vc-frontier", "vc-labs"} {
			require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 300*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				vc, err := e.vc.HiveschedV1alpha1().VirtualClusters().Get(ctx, name, metav1.GetOptions{})
				return err == nil && vc.Status.State == hv1.VirtualClusterActive, nil
			}), "VC %s not Active", name)
		}
	})

	t.Run("a 72-GPU gang binds inside one clique", func(t *testing.T) {
		ps := gb200Gang("frontier", "pretrain", "vc-frontier", 50, 18, 4, true)
		e.create(t, ps)
		nodes := e.waitRunning(t, ps, 90*time.Second)
		cliques := e.cliquesOf(t, nodes)
		require.Len(t, cliques, 1, "one NVLink domain: %v", cliques)
		distinct := map[string]bool{}
		for _, n := range nodes {
			distinct[n] = true
		}
		require.Len(t, distinct, 18, "a tray each")
		e.remove(t, ps)
	})

	t.Run("a gang larger than a domain is refused, saying why", func(t *testing.T) {
		// Opportunistic: a guaranteed one is refused first for its VC (72
		// GB200); no VC bounds an opportunistic gang, the domain does.
		ps := gb200Gang("frontier", "too-big", "vc-frontier", -1, 19, 4, true)
		e.create(t, ps)
		e.waitPodEvent(t, ps[0], "which does not fit in one GB200-NVL72 (72 leaf cells)", 60*time.Second)
		e.requirePending(t, ps, time.Second)
		e.remove(t, ps)
	})

	t.Run("a tenant gets its domain whole under another tenant's churn", func(t *testing.T) {
		// vc-labs' guaranteed 1-GPU jobs inside its half domain, then
		// opportunistic 4-GPU pods on every other GB200 GPU.
		var labs []*v1.Pod
		for i := 0; i < 4; i++ {
			labs = append(labs, gb200Gang("labs", fmt.Sprintf("notebook-%d", i), "vc-labs", 10, 1, 1, false)...)
		}
		e.create(t, labs)
		e.waitRunning(t, labs, 60*time.Second)
		var opp []*v1.Pod
		for i := 0; i < 35; i++ {
			opp = append(opp, gb200Gang("labs", fmt.Sprintf("scavenge-%d", i), "vc-labs", -1, 1, 4, false)...)
		}
		e.create(t, opp)
		e.waitRunning(t, opp, 120*time.Second)
		more := gb200Gang("labs", "scavenge-more", "vc-labs", -1, 1, 4, false)
		e.create(t, more)
		e.requirePending(t, more, 3*time.Second) // every GB200 GPU is taken
		e.remove(t, more)

		ps := gb200Gang("frontier", "pretrain-2", "vc-frontier", 50, 18, 4, true)
		e.create(t, ps)
		nodes := e.waitRunning(t, ps, 120*time.Second)
		require.Len(t, e.cliquesOf(t, nodes), 1, "one NVLink domain")
		// Only opportunistic pods were preempted: vc-labs' guaranteed
		// jobs run on, on their nodes.
		for _, p := range labs {
			got, err := e.kube.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{})
			require.NoError(t, err, "guaranteed pod %s was deleted", p.Name)
			require.Nil(t, got.DeletionTimestamp, "guaranteed pod %s is being deleted", p.Name)
			require.Equal(t, v1.PodRunning, got.Status.Phase)
		}
		gone := 0
		for _, p := range opp {
			got, err := e.kube.CoreV1().Pods(p.Namespace).Get(t.Context(), p.Name, metav1.GetOptions{})
			if err != nil || got.DeletionTimestamp != nil {
				gone++
			}
		}
		require.Equal(t, 18, gone, "one domain's opportunistic pods, exactly, were preempted")
		e.remove(t, ps)
		e.remove(t, opp)
		e.remove(t, labs)
	})

	t.Run("a 2 x 4 gang in a fragmented domain", func(t *testing.T) {
		// vc-frontier's 72-GPU gang holds one domain; vc-labs' 72
		// opportunistic 1-GPU pods fill the other, then one of them goes
		// on each of ten trays: ten GPUs free there, no tray free.
		big := gb200Gang("frontier", "pretrain-3", "vc-frontier", 50, 18, 4, true)
		e.create(t, big)
		bigNodes := e.waitRunning(t, big, 90*time.Second)
		var frag []*v1.Pod
		for i := 0; i < 72; i++ {
			frag = append(frag, gb200Gang("labs", fmt.Sprintf("frag-%d", i), "vc-labs", -1, 1, 1, false)...)
		}
		e.create(t, frag)
		fragNodes := e.waitRunning(t, frag, 120*time.Second)
		byNode := map[string][]*v1.Pod{}
		for i, n := range fragNodes {
			byNode[n] = append(byNode[n], frag[i])
		}
		require.Len(t, byNode, 18, "the 1-GPU pods fill the other domain's 18 trays")
		var freed []*v1.Pod
		for _, ps := range byNode {
			if len(freed) < 10 {
				freed = append(freed, ps[0])
			}
		}
		e.remove(t, freed)

		ps := gb200Gang("labs", "pair", "vc-labs", 10, 2, 4, true)
		e.create(t, ps)
		nodes := e.waitRunning(t, ps, 90*time.Second)
		require.Len(t, e.cliquesOf(t, nodes), 1, "the pair is inside one domain")
		require.NotEqual(t, nodes[0], nodes[1])
		for _, n := range nodes {
			require.NotContains(t, bigNodes, n, "not on vc-frontier's domain")
		}
		// vc-frontier's gang runs on.
		require.Equal(t, bigNodes, e.waitRunning(t, big, 30*time.Second))
		e.remove(t, ps)
		e.remove(t, frag)
		e.remove(t, big)
	})

	t.Run("a tray out for repair: the 72-GPU gang gets the whole domain", func(t *testing.T) {
		// The domain vc-frontier's 72-GPU gang lands in with every tray
		// there; then one of its trays goes (deleted, as a tray pulled
		// for repair is). That domain is short: the next 72-GPU gang goes
		// to the other, whole, domain.
		before := gb200Gang("frontier", "before-repair", "vc-frontier", 50, 18, 4, true)
		e.create(t, before)
		nodes := e.waitRunning(t, before, 90*time.Second)
		e.remove(t, before)
		tray, err := e.kube.CoreV1().Nodes().Get(t.Context(), nodes[5], metav1.GetOptions{})
		require.NoError(t, err)
		short := tray.Labels[cliqueLabel]
		require.NoError(t, e.kube.CoreV1().Nodes().Delete(t.Context(), tray.Name, metav1.DeleteOptions{}))
		t.Cleanup(func() { e.restoreNode(t, tray) })
		require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := e.kube.CoreV1().Nodes().Get(ctx, tray.Name, metav1.GetOptions{})
			return err != nil, nil
		}))
		ps := gb200Gang("frontier", "after-repair", "vc-frontier", 50, 18, 4, true)
		e.create(t, ps)
		cliques := e.cliquesOf(t, e.waitRunning(t, ps, 90*time.Second))
		require.Len(t, cliques, 1)
		require.NotContains(t, cliques, short, "not the domain short of a tray")
		e.remove(t, ps)
	})
}

// restoreNode creates a deleted fake node again as it was (kwok makes it
// Ready, the fake DRA driver publishes its devices again) and waits until
// it is Ready.
func (e *env) restoreNode(t *testing.T, n *v1.Node) {
	fresh := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, Annotations: n.Annotations}, Spec: v1.NodeSpec{}, Status: v1.NodeStatus{
		Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable, Addresses: n.Status.Addresses, NodeInfo: n.Status.NodeInfo}}
	_, err := e.kube.CoreV1().Nodes().Create(context.Background(), fresh, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 300*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := e.kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range got.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}), "node %s not Ready again", n.Name)
}
