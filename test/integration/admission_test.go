package integration

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/plugins/placement"
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
	// The probe's user may create pods in default when RBAC is enforced.
	c.grant(t, metav1.NamespaceDefault, "admission-probe", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}})
	// The API server starts enforcing a new policy in the background (its
	// type-checking status is written by kube-controller-manager, which
	// these tests do not run): probe with a dry-run create of a pod the
	// policy refuses until it is refused.
	probe := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "admission-probe", Namespace: metav1.NamespaceDefault,
			Annotations: map[string]string{hivesched.AnnotationPlacement: "{}"}},
		// hivesched's profile: the GPU pod policy lets it pass.
		Spec: v1.PodSpec{SchedulerName: schedulerName, Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
	cs := c.as(t, "admission-probe")
	var last error
	require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = cs.CoreV1().Pods(probe.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), "hivesched-pod-placement"), nil
	}), "the policies are not enforced: the probe got %v", last)
}

// grant gives user the rules in namespace ns (a Role and its binding).
// The built-in aggregated roles (admin, edit) are empty without
// kube-controller-manager's aggregation controller, which these tests do
// not run.
func (c *cluster) grant(t *testing.T, ns, user string, rules ...rbacv1.PolicyRule) {
	name := "grant-" + user
	_, err := c.kube.RbacV1().Roles(ns).Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: rules}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.kube.RbacV1().RoleBindings(ns).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The authorizer sees new RBAC objects through its informers: wait
	// until it allows the first rule.
	r := rules[0]
	require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		sar, err := c.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: r.APIGroups[0], Resource: r.Resources[0], Verb: r.Verbs[0]},
		}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, nil
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
	// The policies ask the authorizer who the scheduler is: RBAC, as in a
	// real cluster (AlwaysAllow would make everyone the scheduler).
	c := startCluster(t, "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction")
	c.applyManifest(t, "manifests/scheduler/rbac.yaml")
	c.createNodes(t, "adm", 1, 1, 0)
	c.createNamespace(t, "adm")
	c.createVC(t, "adm-vc", []string{"adm"}, "V100-NODE", 1)
	// A tenant who may do anything with pods in its namespace.
	c.grant(t, "adm", "alice", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"*"}})
	c.applyAdmission(t)
	tenant := c.as(t, "alice", "team-a")
	sched := c.as(t, schedulerSA, "system:serviceaccounts", "system:serviceaccounts:"+placement.DefaultNamespace)
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
		// Two policies refuse it (a GPU pod with spec.nodeName, too); the
		// API server reports the first.
		requireForbidden(t, err, "forbidden: ValidatingAdmissionPolicy 'hivesched-")
		forged.Spec.NodeName = ""
		_, err = tenant.CoreV1().Pods("adm").Create(t.Context(), forged, metav1.CreateOptions{})
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
		c.deletePods(t, job)
		c.waitGone(t, job, 30*time.Second)
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

	t.Run("a tenant cannot create a pod with the devices the scheduler hands out (issue 28, 3)", func(t *testing.T) {
		for _, a := range []string{hivesched.AnnotationLeafCellIndices, hivesched.HivedIsolationAnnotation} {
			p := gangPods("adm", "devices", "adm-vc", 0, 1, 0)[0]
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{}
			p.Annotations = map[string]string{a: "0,1,2,3,4,5,6,7"}
			p.Labels = nil
			_, err := tenant.CoreV1().Pods("adm").Create(t.Context(), p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			requireForbidden(t, err, "are written by the hivesched scheduler when it binds a pod; remove "+a)
		}
	})

	t.Run("pods/status and pods/binding cannot change what the scheduler wrote (issue 28, 7)", func(t *testing.T) {
		// A holder of the node-level rights (a kubelet's, say); grant
		// waits until the authorizer has seen the role.
		c.grant(t, "adm", "mallory",
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/status", "pods/binding"}, Verbs: []string{"patch", "get", "update", "create"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}})
		mallory := c.as(t, "mallory")

		job := gangPods("adm", "stat", "adm-vc", 1, 1, 8)
		c.createPods(t, job)
		c.waitBound(t, job, 30*time.Second)
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{hivesched.AnnotationPlacement: nil}}})
		_, err := mallory.CoreV1().Pods("adm").Patch(t.Context(), job[0].Name, types.MergePatchType, b, metav1.PatchOptions{}, "status")
		requireForbidden(t, err, "only the scheduler may change them (changed: hivesched.io/placement)")
		b, _ = json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{hivesched.LabelVirtualCluster: "other"}}})
		_, err = mallory.CoreV1().Pods("adm").Patch(t.Context(), job[0].Name, types.MergePatchType, b, metav1.PatchOptions{}, "status")
		requireForbidden(t, err, "labels are fixed")
		c.deletePods(t, job)

		// A pending pod no scheduler takes, bound by hand with a forged record.
		pending := gangPods("adm", "byhand", "adm-vc", 1, 1, 8)[0]
		pending.Spec.SchedulerName = "nobody"
		_, err = c.kube.CoreV1().Pods("adm").Create(t.Context(), pending, metav1.CreateOptions{})
		require.NoError(t, err)
		binding := &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pending.Name, Namespace: "adm",
			Annotations: map[string]string{hivesched.AnnotationLeafCellIndices: "0,1,2,3,4,5,6,7"}},
			Target: v1.ObjectReference{Kind: "Node", Name: "adm-r0-n0"}}
		err = mallory.CoreV1().Pods("adm").Bind(t.Context(), binding, metav1.CreateOptions{})
		requireForbidden(t, err, "only the hivesched scheduler may bind with hivesched.io/ or hivedscheduler.microsoft.com/ keys")
		binding.Annotations = nil
		binding.Labels = map[string]string{hivesched.LabelAffinityGroup: "elsewhere"}
		err = mallory.CoreV1().Pods("adm").Bind(t.Context(), binding, metav1.CreateOptions{})
		requireForbidden(t, err, "only the hivesched scheduler may bind")
		c.deletePods(t, []*v1.Pod{pending})
	})

	t.Run("a GPU pod cannot skip the scheduler (issue 28, 2)", func(t *testing.T) {
		byName := gangPods("adm", "direct", "", 0, 1, 8)[0]
		byName.Labels, byName.Annotations = nil, nil
		byName.Spec.NodeName = "adm-r0-n0"
		_, err := tenant.CoreV1().Pods("adm").Create(t.Context(), byName, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		requireForbidden(t, err, "remove spec.nodeName (adm-r0-n0) and let the scheduler bind it")
		other := gangPods("adm", "other", "", 0, 1, 8)[0]
		other.Labels, other.Annotations = nil, nil
		other.Spec.SchedulerName = "default-scheduler"
		_, err = tenant.CoreV1().Pods("adm").Create(t.Context(), other, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		requireForbidden(t, err, "set spec.schedulerName to hivesched (it names default-scheduler)")
		// HiveD's pods request no GPU but its marker resource, and carry its spec.
		hived := other.DeepCopy()
		hived.Spec.Containers[0].Resources = v1.ResourceRequirements{}
		hived.Annotations = map[string]string{hivesched.HivedSpecAnnotation: "virtualCluster: adm-vc"}
		_, err = tenant.CoreV1().Pods("adm").Create(t.Context(), hived, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		requireForbidden(t, err, "carries hivesched.io/ scheduling keys")
		// A pod that asks for no GPU is not hivesched's business.
		plain := byName.DeepCopy()
		plain.Spec.Containers[0].Resources = v1.ResourceRequirements{}
		_, err = tenant.CoreV1().Pods("adm").Create(t.Context(), plain, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.NoError(t, err)
		// An identity granted the bypass (a burn-in DaemonSet's controller).
		_, err = c.kube.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "gpu-burn-in"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"hivesched.io"}, Resources: []string{"unscheduledgpupods"}, Verbs: []string{"create"}},
				{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = c.kube.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "gpu-burn-in"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "gpu-burn-in"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "burn-in"}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		// The authorizer sees the new binding through its informers: the
		// first creates may still be refused by RBAC.
		burnIn := c.as(t, "burn-in")
		_ = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err = burnIn.CoreV1().Pods("adm").Create(ctx, byName, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err == nil, nil
		})
		require.NoError(t, err)
	})

	t.Run("the scheduler is whoever RBAC makes it, and creates only its key (issue 28, 9 and 10)", func(t *testing.T) {
		// The scheduler installed under another name: bound to the shipped role.
		_, err := c.kube.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "sched2"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "hivesched-scheduler"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "gpu-scheduler", Namespace: "adm"}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		c.waitAllowed(t, "system:serviceaccount:adm:gpu-scheduler", "write", "", "hivesched.io", "placements")
		sched2 := c.as(t, "system:serviceaccount:adm:gpu-scheduler", "system:serviceaccounts", "system:serviceaccounts:adm")
		job := gangPods("adm", "renamed", "adm-vc", 1, 1, 8)
		c.createPods(t, job)
		c.waitBound(t, job, 30*time.Second)
		rec := c.getPod(t, job[0]).Annotations[hivesched.AnnotationPlacement]
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{hivesched.AnnotationPlacement: rec}}})
		_, err = sched2.CoreV1().Pods("adm").Patch(t.Context(), job[0].Name, types.MergePatchType, b, metav1.PatchOptions{})
		require.True(t, err == nil || apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "hivesched-pod-placement"),
			"the renamed scheduler passes the policy (RBAC may still refuse the patch itself): %v", err)

		keyNS := placement.DefaultNamespace
		for _, s := range []*v1.Secret{
			{ObjectMeta: metav1.ObjectMeta{Name: "steal", Namespace: keyNS, Annotations: map[string]string{v1.ServiceAccountNameKey: "default"}}, Type: v1.SecretTypeServiceAccountToken},
			{ObjectMeta: metav1.ObjectMeta{Name: hivesched.PlacementKeySecret, Namespace: keyNS, Annotations: map[string]string{v1.ServiceAccountNameKey: "default"}}, Type: v1.SecretTypeServiceAccountToken},
			{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: keyNS}, Type: v1.SecretTypeOpaque},
		} {
			_, err := sched.CoreV1().Secrets(keyNS).Create(t.Context(), s, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			requireForbidden(t, err, "the hivesched scheduler creates one Secret, its placement key hivesched-placement-key, of type Opaque")
		}
		key := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: hivesched.PlacementKeySecret, Namespace: keyNS}, Type: v1.SecretTypeOpaque, Data: map[string][]byte{"key": make([]byte, 32)}}
		_, err = sched.CoreV1().Secrets(keyNS).Create(t.Context(), key, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.True(t, err == nil || apierrors.IsAlreadyExists(err), "the scheduler creates its key: %v", err)
		// RBAC gives it nothing in kube-system (issue 28, 8).
		key.Namespace = "kube-system"
		_, err = sched.CoreV1().Secrets("kube-system").Create(t.Context(), key, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.True(t, apierrors.IsForbidden(err), "no Secret of the scheduler's in kube-system: %v", err)
	})

	t.Run("a node cannot lift its own quarantine (issue 28, 4)", func(t *testing.T) {
		// A node outside the physical cluster: only the policies are
		// under test here (devices_test.go has what hivesched reads).
		const name = "adm-quarantined"
		c.createNode(t, name, "nvidia.com/gpu", 8, true)
		patchAs := func(cs kubernetes.Interface, subresource string, patch map[string]any) error {
			b, _ := json.Marshal(patch)
			var sub []string
			if subresource != "" {
				sub = []string{subresource}
			}
			_, err := cs.CoreV1().Nodes().Patch(t.Context(), name, types.MergePatchType, b, metav1.PatchOptions{}, sub...)
			return err
		}
		meta := func(field string, kv map[string]any) map[string]any {
			return map[string]any{"metadata": map[string]any{field: kv}}
		}
		// The operator's verdicts, set by the admin.
		require.NoError(t, patchAs(c.kube, "", map[string]any{
			"metadata": map[string]any{
				"labels":      map[string]any{hivesched.LabelHealth: "bad", "node-restriction.kubernetes.io/hivesched-health": "bad"},
				"annotations": map[string]any{hivesched.AnnotationDeviceHealth: "3=bad"},
			},
			"spec": map[string]any{"unschedulable": true},
		}))
		node := c.as(t, "system:node:"+name, "system:nodes")
		// The policy is enforced in the background after it is created:
		// wait for the first refusal.
		var err error
		require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			err = patchAs(node, "", meta("labels", map[string]any{hivesched.LabelHealth: "good"}))
			return err != nil, nil
		}), "a node relabelled itself good")
		requireForbidden(t, err, "label hivesched.io/health is the operator's verdict on this node")
		requireForbidden(t, patchAs(node, "", meta("labels", map[string]any{hivesched.LabelHealth: nil})), "may not set, change or remove it")
		requireForbidden(t, patchAs(node, "status", meta("labels", map[string]any{hivesched.LabelHealth: nil})), "operator's verdict")
		requireForbidden(t, patchAs(node, "", meta("annotations", map[string]any{hivesched.AnnotationDeviceHealth: nil})),
			"annotation hivesched.io/device-health is the operator's verdict on this node's devices")
		requireForbidden(t, patchAs(node, "status", meta("annotations", map[string]any{hivesched.AnnotationDeviceHealth: ""})), "operator's verdict")
		requireForbidden(t, patchAs(node, "", map[string]any{"spec": map[string]any{"unschedulable": false}}), "a node may not uncordon itself")
		// NodeRestriction's own label prefix: refused by the API server
		// whatever hivesched's policies say.
		requireForbidden(t, patchAs(node, "", meta("labels", map[string]any{"node-restriction.kubernetes.io/hivesched-health": nil})), "is not allowed to modify labels")
		// What the node may still do: report its own devices (they can
		// only get worse) and its other labels.
		require.NoError(t, patchAs(node, "", meta("annotations", map[string]any{"node.hivesched.io/device-health": "1=bad"})))
		require.NoError(t, patchAs(node, "", meta("labels", map[string]any{"example.com/agent": "v2"})))
		// The admin lifts the quarantine.
		require.NoError(t, patchAs(c.kube, "", map[string]any{
			"metadata": map[string]any{"labels": map[string]any{hivesched.LabelHealth: nil}, "annotations": map[string]any{hivesched.AnnotationDeviceHealth: nil}},
			"spec":     map[string]any{"unschedulable": false},
		}))
	})

	t.Run("only a cluster admin or the scheduler may replace the placement key", func(t *testing.T) {
		// Someone with write access to Secrets in the scheduler's
		// namespace (where the key lives: issue 28, 8), but not the
		// scheduler.
		keyNS := placement.DefaultNamespace
		c.grant(t, keyNS, "ops", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"*"}})
		ops := c.as(t, "ops")
		err := ops.CoreV1().Secrets(keyNS).Delete(t.Context(), hivesched.PlacementKeySecret, metav1.DeleteOptions{})
		requireForbidden(t, err, "Secret hivesched-placement-key signs the hivesched scheduler's placement records")
		s, err := c.kube.CoreV1().Secrets(keyNS).Get(t.Context(), hivesched.PlacementKeySecret, metav1.GetOptions{})
		require.NoError(t, err)
		s.Data["key"] = []byte(strings.Repeat("x", 32))
		_, err = ops.CoreV1().Secrets(keyNS).Update(t.Context(), s, metav1.UpdateOptions{})
		requireForbidden(t, err, "only a cluster admin may rotate it")
		// deletecollection's admission request names no Secret (issue 28,
		// 8): refused in the namespace labelled as the scheduler's.
		err = ops.CoreV1().Secrets(keyNS).DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{})
		requireForbidden(t, err, "a bulk delete of Secrets in namespace "+keyNS+" would delete hivesched-placement-key")
		_, err = c.kube.CoreV1().Secrets(keyNS).Get(t.Context(), hivesched.PlacementKeySecret, metav1.GetOptions{})
		require.NoError(t, err, "the key is still there")

		// Elsewhere a bulk delete is anyone's who may delete: the policy
		// names no namespace, the label does.
		c.createNamespace(t, "adm-other")
		c.grant(t, "adm-other", "ops", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"*"}})
		_, err = c.kube.CoreV1().Secrets("adm-other").Create(t.Context(), &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, ops.CoreV1().Secrets("adm-other").DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{}))

		// A scheduler namespace being deleted: what is in it goes (the
		// namespace controller deletes Secrets in bulk, then by name).
		_, err = c.kube.CoreV1().Namespaces().Create(t.Context(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "adm-sched2",
			Labels: map[string]string{"hivesched.io/scheduler-namespace": "true"}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		c.grant(t, "adm-sched2", "ops", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"*"}})
		for _, name := range []string{hivesched.PlacementKeySecret, "other"} {
			_, err = c.kube.CoreV1().Secrets("adm-sched2").Create(t.Context(), &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
				Data: map[string][]byte{"key": make([]byte, 32)}}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		err = ops.CoreV1().Secrets("adm-sched2").DeleteCollection(t.Context(), metav1.DeleteOptions{}, metav1.ListOptions{})
		requireForbidden(t, err, "a bulk delete of Secrets in namespace adm-sched2")
		require.NoError(t, c.kube.CoreV1().Namespaces().Delete(t.Context(), "adm-sched2", metav1.DeleteOptions{}))
		// No namespace controller here: it stays Terminating; delete as it
		// would, and as it does, again until allowed: the policy reads the
		// namespace from the admission plugin's informer, which sees the
		// deletion a moment after the API call returns (refused once in a
		// clean-clone CI run that deleted at once).
		var lastErr error
		require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
			lastErr = ops.CoreV1().Secrets("adm-sched2").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
			return lastErr == nil, nil
		}), "the bulk delete in the namespace being deleted: %v", lastErr)
		left, err := c.kube.CoreV1().Secrets("adm-sched2").List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)
		require.Empty(t, left.Items)
	})
}
