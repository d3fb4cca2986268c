package integration

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

// TestRefusedPodsAlwaysReadAgain (issue 48): a pod refused because the
// object its request is read from does not exist yet is indexed by that
// object's key, and the object's event reads it again: no wake-up is lost,
// whether the object comes long after its pods, between them, or while the
// scheduler reads them (a read in flight when its object is released is
// read again). Twelve gangs of two 1-GPU pods in one VC rack (24 of its 32
// GPUs): six Workload API PodGroups, six explicit AffinityGroups; for half
// of each the pods come first and the objects at the end, for the other
// half the object comes right after the gang's first pod. Every gang must
// bind whole.
func TestRefusedPodsAlwaysReadAgain(t *testing.T) {
	c := startWorkloadCluster(t)
	c.createNodes(t, "wk", 1, 4, 0)
	c.createNamespace(t, "wk")
	c.createVC(t, "wk-vc", []string{"wk"}, "V100-RACK", 1)
	c.startScheduler(t, physicalCluster("wk", 1, 4, 0))
	vcLabel := map[string]string{hivesched.LabelVirtualCluster: "wk-vc"}

	type gang struct {
		pods   []*v1.Pod
		create func()
	}
	var gangs []gang
	for i := 0; i < 6; i++ {
		pg := fmt.Sprintf("pg%d", i)
		gangs = append(gangs, gang{workloadPods("wk", pg, "", 2, 1), func() { c.createPodGroup(t, "wk", pg, 2, vcLabel) }})
		ag := fmt.Sprintf("ag%d", i)
		gangs = append(gangs, gang{explicitPods("wk", ag, 2, 1), func() {
			c.createAG(t, "wk", ag, "wk-vc", 0, hv1.AffinityGroupMember{PodNumber: 2, LeafCellNumber: 1})
		}})
	}
	var all []*v1.Pod
	var late []func()
	for i, g := range gangs {
		all = append(all, g.pods...)
		if i%4 < 2 {
			// Pods first; their object comes once every gang's pods exist.
			c.createPods(t, g.pods)
			late = append(late, g.create)
			continue
		}
		// The object between the gang's pods: the first pod is refused,
		// or is being read, when it comes.
		c.createPods(t, g.pods[:1])
		g.create()
		c.createPods(t, g.pods[1:])
	}
	c.requireUnbound(t, gangs[0].pods, time.Second)
	for _, create := range late {
		create()
	}
	c.waitBound(t, all, 60*time.Second)
	c.usedIs(t, "wk-vc", 24)
}
