package integration

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hivesched/hivesched/plugins/hivesched"
)

// applyAdmission creates the policies and bindings of manifests/admission
// and waits until they are enforced.
func (c *cluster) applyAdmission(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "manifests", "admission", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		c.applyManifest(t, f)
	}
	// The API server starts enforcing a new policy in the background (its
	// type-checking status is written by kube-controller-manager, which
	// these tests do not run): probe with a dry-run create of a pod the
	// policy refuses until it is refused.
	probe := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "admission-probe", Namespace: metav1.NamespaceDefault,
			Annotations: map[string]string{hivesched.AnnotationPlacement: "{}"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
	cs := c.as(t, "admission-probe")
	require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "hivesched-pod-placement"), nil
	}))
}

// as is a client acting as user in groups (impersonation by the admin).
func (c *cluster) as(t *testing.T, user string, groups ...string) kubernetes.Interface {
	cfg := rest.CopyConfig(c.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	return kubernetes.NewForConfigOrDie(cfg)
}

// TestAdmissionPolicy (issue 15): the shipped policies refuse a tenant's
// forged placement record and changes to a bound pod's scheduling labels and
// annotations, and the placement key's replacement; the scheduler's
// identity may do what it does.
func TestAdmissionPolicy(t *testing.T) {
	c := startCluster(t)
	c.createNodes(t, "adm", 1, 1, 0)
	c.createNamespace(t, "adm")
	c.createVC(t, "adm-vc", []string{"adm"}, "V100-NODE", 1)
	// A tenant who may do anything with pods in its namespace.
	_, err := c.kube.RbacV1().RoleBindings("adm").Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-admin", Namespace: "adm"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "alice"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	c.applyAdmission(t)
	tenant := c.as(t, "alice", "team-a")
	sched := c.as(t, "system:serviceaccount:kube-system:hivesched-scheduler", "system:serviceaccounts", "system:serviceaccounts:kube-system")
	c.startScheduler(t, physicalCluster("adm", 1, 1, 0))

	requireForbidden := func(t *testing.T, err error, want string) {
		t.Helper()
		require.Error(t, err)
		require.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "%v", err)
		require.Contains(t, err.Error(), want)
	}

	t.Run("a tenant cannot create a pod with a placement record", func(t *testing.T) {
		forged := gangPods("adm", "forged", "adm-vc", 1000, 1, 8)[0]
		forged.Spec.NodeName = "adm-r0-n0"
		forged.Annotations[hivesched.AnnotationPlacement] = `{"group":"adm/forged","virtualCluster":"adm-vc","priority":1000,"members":[{"podNumber":1,"leafCellNumber":8}],"node":"adm-r0-n0","leafCellIndices":[0,1,2,3,4,5,6,7]}`
		forged.Annotations[hivesched.AnnotationPlacementSignature] = "AAAA"
		_, err := tenant.CoreV1().Pods("adm").Create(t.Context(), forged, metav1.CreateOptions{})
		requireForbidden(t, err, "are written by the hivesched scheduler when it binds a pod; remove hivesched.io/placement, hivesched.io/placement-signature from the pod")
	})

	t.Run("a tenant cannot relabel or re-annotate a bound pod, nor touch its record; the scheduler can", func(t *testing.T) {
		job := gangPods("adm", "job", "adm-vc", 1, 1, 8)
		_, err := tenant.CoreV1().Pods("adm").Create(t.Context(), job[0], metav1.CreateOptions{})
		require.NoError(t, err, "a plain pod of the tenant's is admitted")
		c.waitBound(t, job, 30*time.Second)
		bound := c.getPod(t, job[0])
		require.NotEmpty(t, bound.Annotations[hivesched.AnnotationPlacement])

		patch := func(cs kubernetes.Interface, field string, kv map[string]any) error {
			b, _ := json.Marshal(map[string]any{"metadata": map[string]any{field: kv}})
			_, err := cs.CoreV1().Pods("adm").Patch(t.Context(), job[0].Name, types.MergePatchType, b, metav1.PatchOptions{})
			return err
		}
		requireForbidden(t, patch(tenant, "labels", map[string]any{hivesched.LabelAffinityGroup: "other"}),
			"its hivesched.io/ and hivedscheduler.microsoft.com/ labels are fixed")
		requireForbidden(t, patch(tenant, "labels", map[string]any{hivesched.LabelVirtualCluster: nil}),
			"labels are fixed")
		requireForbidden(t, patch(tenant, "annotations", map[string]any{hivesched.AnnotationPriority: "1000"}),
			"its hivesched.io/ and hivedscheduler.microsoft.com/ annotations are fixed")
		requireForbidden(t, patch(tenant, "annotations", map[string]any{hivesched.HivedSpecAnnotation: "virtualCluster: x"}),
			"annotations are fixed")
		requireForbidden(t, patch(tenant, "annotations", map[string]any{hivesched.AnnotationPlacement: nil}),
			"only the scheduler may change them (changed: hivesched.io/placement)")
		require.NoError(t, patch(tenant, "labels", map[string]any{"team": "vision"}), "other labels stay the tenant's")

		// The scheduler rewrites a record (a lazy downgrade does).
		require.NoError(t, patch(sched, "annotations", map[string]any{hivesched.AnnotationPlacement: bound.Annotations[hivesched.AnnotationPlacement]}))
		// Unchanged by anyone's refused patches.
		now := c.getPod(t, job[0])
		require.Equal(t, "job", now.Labels[hivesched.LabelAffinityGroup])
		require.Equal(t, bound.Annotations[hivesched.AnnotationPlacementSignature], now.Annotations[hivesched.AnnotationPlacementSignature])
	})

	t.Run("a pending pod's scheduling labels are still the tenant's to fix", func(t *testing.T) {
		p := gangPods("adm", "pending", "no-such-vc", 0, 1, 8)[0]
		_, err := tenant.CoreV1().Pods("adm").Create(t.Context(), p, metav1.CreateOptions{})
		require.NoError(t, err)
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{hivesched.LabelVirtualCluster: "adm-vc"}}})
		_, err = tenant.CoreV1().Pods("adm").Patch(t.Context(), p.Name, types.MergePatchType, b, metav1.PatchOptions{})
		require.NoError(t, err)
		c.deletePods(t, []*v1.Pod{p})
	})

	t.Run("only a cluster admin or the scheduler may replace the placement key", func(t *testing.T) {
		// Someone with write access to Secrets in kube-system, but not the scheduler.
		_, err := c.kube.RbacV1().RoleBindings("kube-system").Create(t.Context(), &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "ops-edit", Namespace: "kube-system"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "ops"}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		ops := c.as(t, "ops")
		err = ops.CoreV1().Secrets("kube-system").Delete(t.Context(), hivesched.PlacementKeySecret, metav1.DeleteOptions{})
		requireForbidden(t, err, "Secret hivesched-placement-key signs the hivesched scheduler's placement records")
		s, err := c.kube.CoreV1().Secrets("kube-system").Get(t.Context(), hivesched.PlacementKeySecret, metav1.GetOptions{})
		require.NoError(t, err)
		s.Data["key"] = []byte(strings.Repeat("x", 32))
		_, err = ops.CoreV1().Secrets("kube-system").Update(t.Context(), s, metav1.UpdateOptions{})
		requireForbidden(t, err, "only a cluster admin may rotate it")
	})
}
