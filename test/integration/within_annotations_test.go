package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

// TestWithinAnnotations: a native gang asks to stay inside one rack with
// Kueue's kueue.x-k8s.io/podset-required-topology, as a Kueue job's pod
// template carries it (podrequest's within.go). Two racks of two nodes; a
// VC of node cells, so that nothing but the constraint holds its gang to
// one rack; another VC's pod takes a node of one rack. Without the
// annotation a gang of two nodes takes that rack's last node and one of the
// other rack; with it, both nodes of the free rack. A gang larger than a
// rack, a key no cell type declares, and annotations that disagree are
// refused with the reason on the pod, holding no cells.
func TestWithinAnnotations(t *testing.T) {
	const rackKey = "topology.kubernetes.io/rack"
	c := startCluster(t)
	c.createNodes(t, "wa", 2, 2, 0)
	c.createNamespace(t, "wa")
	c.createVC(t, "wa-other", []string{"wa"}, "V100-NODE", 1)
	c.createVC(t, "wa-vc", []string{"wa"}, "V100-NODE", 3)
	c.startScheduler(t, withRackKey(physicalCluster("wa", 2, 2, 0)))
	rackOf := func(node string) string { return strings.Split(node, "-")[1] } // wa-r<i>-n<j>
	withKueueRack := func(pods []*v1.Pod) []*v1.Pod {
		for _, p := range pods {
			p.Annotations[hivesched.AnnotationKueueRequiredTopology] = rackKey
		}
		return pods
	}

	other := gangPods("wa", "other", "wa-other", 0, 1, 8)
	c.createPods(t, other)
	used := rackOf(c.waitBound(t, other, 30*time.Second)[0])

	// Without the constraint: spread over both racks.
	free := gangPods("wa", "free", "wa-vc", 0, 2, 8)
	c.createPods(t, free)
	nodes := c.waitBound(t, free, 30*time.Second)
	require.NotEqual(t, rackOf(nodes[0]), rackOf(nodes[1]), "without the constraint the gang takes rack %s's last node: %v", used, nodes)
	c.deletePods(t, free)
	c.waitGone(t, free, 30*time.Second)
	c.usedIs(t, "wa-vc", 0)

	// With Kueue's annotation: one rack, the free one.
	held := withKueueRack(gangPods("wa", "held", "wa-vc", 0, 2, 8))
	c.createPods(t, held)
	nodes = c.waitBound(t, held, 30*time.Second)
	require.NotEqual(t, nodes[0], nodes[1])
	require.Equal(t, rackOf(nodes[0]), rackOf(nodes[1]), "one rack: %v", nodes)
	require.NotEqual(t, used, rackOf(nodes[0]), "the rack with room for both: %v", nodes)
	for _, p := range held {
		require.Contains(t, c.getPod(t, p).Annotations[hivesched.AnnotationPlacement], `"withinTopologyKey":"`+rackKey+`"`)
	}
	ag := c.waitAG(t, "wa", "held", phaseIs(hv1.AffinityGroupRunning))
	require.Equal(t, rackKey, ag.Spec.WithinTopologyKey)
	c.deletePods(t, held)
	c.waitGone(t, held, 30*time.Second)
	c.usedIs(t, "wa-vc", 0)

	// Three nodes (the VC has them) do not fit in one rack of two.
	big := withKueueRack(gangPods("wa", "big", "wa-vc", 0, 3, 8))
	c.createPods(t, big)
	c.waitEvent(t, big[0], `InvalidSchedulingSpec: affinity group "wa/big": asks for 24 leaf cells in total, which does not fit in one V100-RACK (16 leaf cells), the level withinTopologyKey "`+rackKey+`" names`, 30*time.Second)

	// A key no cell type declares: the declared ones are listed.
	zone := gangPods("wa", "zone", "wa-vc", 0, 1, 8)
	zone[0].Annotations[hivesched.AnnotationWithinTopology] = "topology.kubernetes.io/zone"
	// Two annotations that disagree.
	both := withKueueRack(gangPods("wa", "both", "wa-vc", 0, 1, 8))
	both[0].Annotations[hivesched.AnnotationKAIRequiredPlacement] = "nvidia.com/gpu.clique"
	c.createPods(t, append(zone, both...))
	c.waitEvent(t, zone[0], `InvalidSchedulingSpec: affinity group "wa/zone": withinTopologyKey "topology.kubernetes.io/zone" names no cell level of a chain it may use (the cell types declare "kubernetes.io/hostname", "`+rackKey+`")`, 30*time.Second)
	c.waitEvent(t, both[0], `InvalidSchedulingSpec: annotations kueue.x-k8s.io/podset-required-topology="`+rackKey+`" and kai.scheduler/topology-required-placement="nvidia.com/gpu.clique" name different topology levels`, 30*time.Second)
	c.requireUnbound(t, append(big, append(zone, both...)...), time.Second)
	c.usedIs(t, "wa-vc", 0)
}
