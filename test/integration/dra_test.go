package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
)

// Gangs that ask for GPUs with ResourceClaimTemplates get claims that hold
// exactly the devices of their cells, written by hivesched before the pods
// are bound; a pod that asks both ways is refused; the cells go when the
// claims are released after the pods.
func TestDRAGangClaimsHoldTheirCells(t *testing.T) {
	c := startCluster(t)
	const ns = "dra"
	c.createNamespace(t, ns)
	c.startClaimController(t)
	c.createDRANodes(t, ns, 1, 2)
	c.createVC(t, "dra-a", []string{ns}, "V100-NODE", 2)
	c.startScheduler(t, physicalCluster(ns, 1, 2, 0))

	// Two pods of 4 GPUs, then a pod of 8: three claims, disjoint devices.
	g4 := c.claimGangPods(t, ns, "g4", "dra-a", 0, 2, 4, schedulerName)
	c.createPods(t, g4)
	c.waitBound(t, g4, 30*time.Second)
	c.requireClaimsMatchCells(t, g4)
	g8 := c.claimGangPods(t, ns, "g8", "dra-a", 0, 1, 8, schedulerName)
	c.createPods(t, g8)
	c.waitBound(t, g8, 30*time.Second)
	c.requireClaimsMatchCells(t, g8)
	c.requireNoDeviceTwice(t)
	c.waitVCStatus(t, "dra-a", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 16 })

	// Both ways at once: refused, saying so.
	mixed := c.claimGangPods(t, ns, "mixed", "dra-a", 0, 1, 2, schedulerName)
	q := resource.MustParse("2")
	mixed[0].Spec.Containers[0].Resources.Requests = v1.ResourceList{"nvidia.com/gpu": q}
	mixed[0].Spec.Containers[0].Resources.Limits = v1.ResourceList{"nvidia.com/gpu": q}
	c.createPods(t, mixed)
	ev := c.waitEvent(t, mixed[0], "InvalidSchedulingSpec", 30*time.Second)
	require.Contains(t, ev, "asks for GPUs twice")

	// The 8-GPU pod finishes: its claim is released (the resourceclaim
	// controller, after the pod), then its cells: a new 8-GPU gang binds.
	c.deletePods(t, g8)
	g8b := c.claimGangPods(t, ns, "g8b", "dra-a", 0, 1, 8, schedulerName)
	c.createPods(t, g8b)
	c.waitBound(t, g8b, 60*time.Second)
	c.requireClaimsMatchCells(t, g8b)
	c.requireNoDeviceTwice(t)
	for _, p := range append(g4, g8b...) {
		for _, e := range c.events(t, p) {
			require.False(t, strings.Contains(e, "allocated elsewhere"), e)
			require.False(t, strings.Contains(e, "ForeignDevicesCounted"), e)
		}
	}
}
