package integration

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestOwnWritesRefused (issue 28, 10): a scheduler whose identity is not
// the one the admission policies exempt (here: its role lacks "write" on
// placements.hivesched.io, as an installation under another name without
// the shipped binding would) has its Bindings refused. It says so where an
// operator looks: a Warning event on the pod, and the inspect server's
// /readyz fails; once the right is granted, the gang binds and /readyz
// passes again.
func TestOwnWritesRefused(t *testing.T) {
	c := startCluster(t, "--authorization-mode=Node,RBAC")
	c.applyManifest(t, "manifests/scheduler/rbac.yaml")
	c.applyAdmission(t)
	roles := c.kube.RbacV1().ClusterRoles()
	role, err := roles.Get(t.Context(), "hivesched-scheduler", metav1.GetOptions{})
	require.NoError(t, err)
	var placements rbacv1.PolicyRule
	var rest []rbacv1.PolicyRule
	for _, r := range role.Rules {
		if len(r.Resources) == 1 && r.Resources[0] == "placements" {
			placements = r
			continue
		}
		rest = append(rest, r)
	}
	require.NotEmpty(t, placements.Verbs, "the shipped role grants write on placements.hivesched.io")
	role.Rules = rest
	_, err = roles.Update(t.Context(), role, metav1.UpdateOptions{})
	require.NoError(t, err)
	mayWrite := func(want bool) {
		require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			sar, err := c.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: schedulerSA, ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "hivesched.io", Resource: "placements", Verb: "write"},
			}}, metav1.CreateOptions{})
			return err == nil && sar.Status.Allowed == want, nil
		}))
	}
	mayWrite(false)

	c.createNodes(t, "own", 1, 1, 0)
	c.createNamespace(t, "own")
	c.createVC(t, "own-vc", []string{"own"}, "V100-NODE", 1)
	addr := freeAddr(t)
	c.startScheduler(t, physicalCluster("own", 1, 1, 0), withKubeconfig(writeKubeconfig(t, c.asScheduler())), withInspect(addr))
	readyz := func() int {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Eventually(t, func() bool { return readyz() == http.StatusOK }, 30*time.Second, 100*time.Millisecond, "ready before any write")

	job := gangPods("own", "g", "own-vc", 1, 1, 8)
	c.createPods(t, job)
	ev := c.waitEvent(t, job[0], "refused by admission", 60*time.Second)
	require.Contains(t, ev, "binding write")
	require.Eventually(t, func() bool { return readyz() == http.StatusServiceUnavailable }, 10*time.Second, 100*time.Millisecond,
		"not ready while its own writes are refused")

	role, err = roles.Get(t.Context(), "hivesched-scheduler", metav1.GetOptions{})
	require.NoError(t, err)
	role.Rules = append(role.Rules, placements)
	_, err = roles.Update(t.Context(), role, metav1.UpdateOptions{})
	require.NoError(t, err)
	mayWrite(true)
	c.waitBound(t, job, 90*time.Second)
	require.Eventually(t, func() bool { return readyz() == http.StatusOK }, 10*time.Second, 100*time.Millisecond, "ready again once a write went through")
}
