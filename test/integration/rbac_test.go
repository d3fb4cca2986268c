package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/plugins/placement"
)

const schedulerSA = "system:serviceaccount:hivesched-system:hivesched-scheduler"

// asScheduler is the rest config of the scheduler's service account
// (impersonated by the admin: the test server has no token controller).
func (c *cluster) asScheduler() *rest.Config {
	cfg := rest.CopyConfig(c.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: schedulerSA,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:hivesched-system", "system:authenticated"}}
	return cfg
}

// TestSchedulerUnderShippedRBAC (issue 15): on an API server that enforces
// RBAC, the scheduler running as its service account with nothing but
// manifests/scheduler/rbac.yaml does all of its work: it creates its key,
// binds gangs, downgrades lazily (a record patch), preempts (deletes),
// writes VC status; its leader lease is its own by name.
func TestSchedulerUnderShippedRBAC(t *testing.T) {
	c := startCluster(t, "--authorization-mode=Node,RBAC")
	c.applyManifest(t, "manifests/scheduler/rbac.yaml")
	c.createNodes(t, "rbac", 1, 2, 0)
	c.createNamespace(t, "rbac")
	c.createVC(t, "rbac-vc", []string{"rbac"}, "V100-NODE", 1)
	inspectAddr := freeAddr(t)
	c.startScheduler(t, physicalCluster("rbac", 1, 2, 0), withKubeconfig(writeKubeconfig(t, c.asScheduler())), withInspect(inspectAddr))

	// The key was created by the scheduler's identity at start, in its
	// own namespace (issue 28, finding 8), not in kube-system.
	_, err := c.kube.CoreV1().Secrets(placement.DefaultNamespace).Get(t.Context(), hivesched.PlacementKeySecret, metav1.GetOptions{})
	require.NoError(t, err)
	_, err = c.kube.CoreV1().Secrets("kube-system").Get(t.Context(), hivesched.PlacementKeySecret, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "no key in kube-system: %v", err)

	low := gangPods("rbac", "low", "rbac-vc", 1, 1, 8)
	low[0].Annotations[hivesched.AnnotationLazyPreemption] = "true"
	c.createPods(t, low)
	c.waitBound(t, low, 30*time.Second)
	c.waitVCStatus(t, "rbac-vc", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 8 })

	// A lazy downgrade patches low's record; high binds.
	high := gangPods("rbac", "high", "rbac-vc", 5, 1, 8)
	c.createPods(t, high)
	c.waitBound(t, high, 30*time.Second)
	require.Eventually(t, func() bool {
		return strings.Contains(c.getPod(t, low[0]).Annotations[hivesched.AnnotationPlacement], `"downgraded":true`)
	}, 20*time.Second, 100*time.Millisecond, "the downgrade is written to low's record")

	// A higher priority job preempts high by deleting it.
	top := gangPods("rbac", "top", "rbac-vc", 10, 1, 8)
	c.createPods(t, top)
	c.waitEvent(t, high[0], "preempted by affinity group rbac/top", 20*time.Second)
	c.waitBound(t, top, 30*time.Second)
	c.waitVCStatus(t, "rbac-vc", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 8 && st.OpportunisticLeafCells == 8 })
	// AffinityGroups: created for the gangs, their status written.
	c.waitAG(t, "rbac", "top", phaseIs(hv1.AffinityGroupRunning))
	c.waitAG(t, "rbac", "high", phaseIs(hv1.AffinityGroupFailed))

	// Its lease by name, no other.
	sa := kubernetes.NewForConfigOrDie(c.asScheduler())
	leases := sa.CoordinationV1().Leases("kube-system")
	for _, name := range []string{"hivesched", "someone-else"} {
		_, err := leases.Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err, "create cannot be limited by name (system:kube-scheduler grants it)")
	}
	l, err := leases.Get(t.Context(), "hivesched", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = leases.Update(t.Context(), l, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = leases.Get(t.Context(), "someone-else", metav1.GetOptions{})
	require.True(t, apierrors.IsForbidden(err), "another lease is not the scheduler's: %v", err)
	// Nor other Secrets, nor any Secret in kube-system.
	_, err = sa.CoreV1().Secrets(placement.DefaultNamespace).List(t.Context(), metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "the scheduler lists no Secrets: %v", err)
	_, err = sa.CoreV1().Secrets("kube-system").Get(t.Context(), hivesched.PlacementKeySecret, metav1.GetOptions{})
	require.True(t, apierrors.IsForbidden(err), "the scheduler reads no Secret in kube-system: %v", err)

	// The inspect API reviews its callers with the scheduler's identity
	// (TokenReview, SubjectAccessReview: granted by system:kube-scheduler).
	var groups []iv1.AffinityGroup
	require.Equal(t, http.StatusOK, c.inspectGet(t, inspectAddr, "affinitygroups", &groups))
	require.NotEmpty(t, groups)
	var e iv1.Error
	require.Equal(t, http.StatusUnauthorized, inspectGetAs(t, "nope", inspectAddr, "affinitygroups", &e))
}
