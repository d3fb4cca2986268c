package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

// TestTenantsCannotCheat: what a tenant who can create and patch pods in its
// own namespace could do to the bookkeeping, and what stops it (issue 15,
// docs/security.md).
func TestTenantsCannotCheat(t *testing.T) {
	c := startCluster(t)

	t.Run("a forged or copied placement never takes or blocks cells after a restart", func(t *testing.T) {
		c.createNodes(t, "forge", 1, 2, 0)
		c.createNamespace(t, "forge-a")
		c.createNamespace(t, "forge-b")
		c.createVC(t, "forge-va", []string{"forge-a"}, "V100-NODE", 1)
		c.createVC(t, "forge-vb", []string{"forge-b"}, "V100-NODE", 1)
		s := c.startScheduler(t, physicalCluster("forge", 1, 2, 0))
		real := gangPods("forge-b", "real", "forge-vb", 0, 1, 8)
		c.createPods(t, real)
		realNode := c.waitBound(t, real, 30*time.Second)[0]
		otherNode := "forge-r0-n0"
		if realNode == otherNode {
			otherNode = "forge-r0-n1"
		}
		bound := c.getPod(t, real[0])

		// Tenant b forges: a record of another namespace's group in VC a at
		// priority 1000 on the free node, and a copy of its own real
		// (signed) record on a pod of its own on the same node.
		forged := gangPods("forge-b", "forged", "forge-vb", 0, 1, 8)[0]
		forged.Spec.NodeName = otherNode
		forged.Annotations[hivesched.AnnotationPlacement] = `{"group":"forge-a/x","virtualCluster":"forge-va","priority":1000,` +
			`"members":[{"podNumber":1,"leafCellNumber":8}],"node":"` + otherNode + `","leafCellIndices":[0,1,2,3,4,5,6,7]}`
		copied := gangPods("forge-b", "copied", "forge-vb", 0, 1, 8)[0]
		copied.Spec.NodeName = realNode
		copied.Annotations[hivesched.AnnotationPlacement] = bound.Annotations[hivesched.AnnotationPlacement]
		copied.Annotations[hivesched.AnnotationPlacementSignature] = bound.Annotations[hivesched.AnnotationPlacementSignature]
		// The forged pods request no GPUs: what is tested is the record
		// (a pod that really requests GPUs on a node takes them from the
		// node's allocatable whoever placed it).
		for _, p := range []*v1.Pod{forged, copied} {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{}
		}
		c.createPods(t, []*v1.Pod{forged, copied})

		s.stop()
		c.startScheduler(t, physicalCluster("forge", 1, 2, 0))
		c.waitEvent(t, forged, "PlacementNotTrusted", 20*time.Second)
		c.waitEvent(t, copied, "is not signed by this scheduler for this pod", 20*time.Second)
		// VC a's own job gets the node the forged record claimed.
		a := gangPods("forge-a", "a", "forge-va", 0, 1, 8)
		c.createPods(t, a)
		require.Equal(t, []string{otherNode}, c.waitBound(t, a, 30*time.Second))
		// The real group was recovered (its record verifies): VC b is full.
		c.waitVCStatus(t, "forge-vb", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 8 })
		c.waitVCStatus(t, "forge-va", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 8 })
	})

	t.Run("relabelling a bound pod changes nothing: its deletion frees its group's cells, and a restart keeps them", func(t *testing.T) {
		c.createNodes(t, "relabel", 1, 1, 0)
		c.createNamespace(t, "relabel")
		c.createVC(t, "relabel-vc", []string{"relabel"}, "V100-NODE", 1)
		s := c.startScheduler(t, physicalCluster("relabel", 1, 1, 0))
		g := gangPods("relabel", "g", "relabel-vc", 0, 1, 8)
		c.createPods(t, g)
		c.waitBound(t, g, 30*time.Second)
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"labels":      map[string]string{hivesched.LabelAffinityGroup: "other"},
			"annotations": map[string]string{hivesched.AnnotationPriority: "1000"},
		}})
		require.NoError(t, err)
		_, err = c.kube.CoreV1().Pods("relabel").Patch(t.Context(), g[0].Name, types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err)
		c.waitEvent(t, g[0], "SchedulingSpecChangeIgnored", 20*time.Second)

		// After a restart the pod still holds its cells (its record says
		// which group it is in): a new job of the VC waits.
		s.stop()
		c.startScheduler(t, physicalCluster("relabel", 1, 1, 0))
		h := gangPods("relabel", "h", "relabel-vc", 0, 1, 8)
		c.createPods(t, h)
		c.requireUnbound(t, h, 3*time.Second)
		// Deleting the relabelled pod frees the cells of the group it was
		// placed in: the waiting job binds.
		c.deletePods(t, g)
		c.waitBound(t, h, 30*time.Second)
	})

	t.Run("a member that needs new cells is admitted like a new group", func(t *testing.T) {
		c.createNodes(t, "join", 1, 2, 0)
		c.createNamespace(t, "join")
		c.createVC(t, "join-vc", []string{"join"}, "V100-NODE", 2)
		// A 2x8 gang ran before a restart; one member is bound, the other
		// was never created.
		gang := gangPods("join", "g", "join-vc", 0, 2, 8)
		gang[0].Spec.NodeName = "join-r0-n0"
		gang[0].Annotations[hivesched.AnnotationPlacement] = `{"group":"join/g","virtualCluster":"join-vc","priority":0,` +
			`"members":[{"podNumber":2,"leafCellNumber":8}],"node":"join-r0-n0","leafCellIndices":[0,1,2,3,4,5,6,7]}`
		c.createBoundPods(t, gang[:1])
		c.startScheduler(t, physicalCluster("join", 1, 2, 0))
		c.waitVCStatus(t, "join-vc", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 8 })
		// The namespace loses access to the VC: the missing member would
		// bind more of the VC's cells, so it is refused.
		vc, err := c.vc.HiveschedV1alpha1().VirtualClusters().Get(t.Context(), "join-vc", metav1.GetOptions{})
		require.NoError(t, err)
		vc.Spec.AllowedNamespaces = []string{"someone-else"}
		_, err = c.vc.HiveschedV1alpha1().VirtualClusters().Update(t.Context(), vc, metav1.UpdateOptions{})
		require.NoError(t, err)
		time.Sleep(time.Second) // the informer delivers the change
		c.createPods(t, gang[1:])
		c.waitEvent(t, gang[1], "VirtualClusterRefused", 20*time.Second)
		c.requireUnbound(t, gang[1:], 2*time.Second)
	})

	t.Run("a replica recovers when it starts leading: what the old leader bound meanwhile counts", func(t *testing.T) {
		c.createNodes(t, "lead", 1, 1, 0)
		c.createNamespace(t, "lead")
		c.createVC(t, "lead-vc", []string{"lead"}, "V100-NODE", 1)
		// Another replica holds the lease.
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "lead-scheduler", Namespace: "kube-system"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("old-leader"), LeaseDurationSeconds: ptr.To[int32](3600),
				AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}},
		}
		_, err := c.kube.CoordinationV1().Leases("kube-system").Create(t.Context(), lease, metav1.CreateOptions{})
		require.NoError(t, err)
		c.startScheduler(t, physicalCluster("lead", 1, 1, 0), withAwaitLeadership)
		// The old leader binds a job after this replica started.
		old := gangPods("lead", "old", "lead-vc", 0, 1, 8)
		old[0].Spec.NodeName = "lead-r0-n0"
		old[0].Annotations[hivesched.AnnotationPlacement] = `{"group":"lead/old","virtualCluster":"lead-vc","priority":0,` +
			`"members":[{"podNumber":1,"leafCellNumber":8}],"node":"lead-r0-n0","leafCellIndices":[0,1,2,3,4,5,6,7]}`
		c.createBoundPods(t, old)
		// A standby writes no VC status.
		time.Sleep(2 * time.Second)
		vc, err := c.vc.HiveschedV1alpha1().VirtualClusters().Get(t.Context(), "lead-vc", metav1.GetOptions{})
		require.NoError(t, err)
		require.Empty(t, vc.Status.State, "a standby wrote the VC status")
		// This process campaigns for the lease (client-go's LeaderElector,
		// as kube-scheduler's), and wins once the old leader is gone.
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		lock, err := resourcelock.New(resourcelock.LeasesResourceLock, "kube-system", "lead-scheduler", c.kube.CoreV1(), c.kube.CoordinationV1(),
			resourcelock.ResourceLockConfig{Identity: "this-replica"})
		require.NoError(t, err)
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
			ReleaseOnCancel: true, Name: "lead-scheduler",
			Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}},
		})
		require.NoError(t, err)
		go elector.Run(ctx)
		time.Sleep(2 * time.Second)
		require.False(t, elector.IsLeader())
		vc, err = c.vc.HiveschedV1alpha1().VirtualClusters().Get(t.Context(), "lead-vc", metav1.GetOptions{})
		require.NoError(t, err)
		require.Empty(t, vc.Status.State, "a standby wrote the VC status")
		require.NoError(t, c.kube.CoordinationV1().Leases("kube-system").Delete(t.Context(), "lead-scheduler", metav1.DeleteOptions{}))
		c.waitVCStatus(t, "lead-vc", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 8 })
		next := gangPods("lead", "next", "lead-vc", 0, 1, 8)
		c.createPods(t, next)
		c.requireUnbound(t, next, 3*time.Second)
		c.deletePods(t, old)
		c.waitBound(t, next, 30*time.Second)
	})
}
