package manifests

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/plugins/placement"
)

// documents reads every YAML document of a manifest file.
func documents(t *testing.T, path ...string) [][]byte {
	raw, err := os.ReadFile(filepath.Join(append([]string{"..", ".."}, path...)...))
	require.NoError(t, err)
	dec := yaml.NewDocumentDecoder(io.NopCloser(bytes.NewReader(raw)))
	var out [][]byte
	buf := make([]byte, 1<<20)
	for {
		n, err := dec.Read(buf)
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		out = append(out, slices.Clone(buf[:n]))
	}
}

func kindOf(t *testing.T, doc []byte) string {
	var meta struct{ Kind string }
	require.NoError(t, sigsyaml.Unmarshal(doc, &meta))
	return meta.Kind
}

// TestSchedulerDeployment: the shipped Deployment never runs two replicas'
// caches side by side, runs unprivileged and limits its memory.
func TestSchedulerDeployment(t *testing.T) {
	docs := documents(t, "manifests", "scheduler", "deployment.yaml")
	require.Len(t, docs, 1)
	var d appsv1.Deployment
	require.NoError(t, sigsyaml.UnmarshalStrict(docs[0], &d))
	require.Equal(t, appsv1.RecreateDeploymentStrategyType, d.Spec.Strategy.Type)
	pod := d.Spec.Template.Spec
	require.Equal(t, "hivesched-scheduler", pod.ServiceAccountName)
	require.True(t, *pod.SecurityContext.RunAsNonRoot)
	require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	require.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	require.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	require.False(t, c.Resources.Limits.Memory().IsZero(), "a memory limit")
	require.False(t, c.Resources.Requests.Cpu().IsZero(), "a CPU request")
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	require.Equal(t, "metadata.namespace", env["POD_NAMESPACE"], "the placement key's namespace is the scheduler's")
}

// TestSchedulerNamespace (issue 28, finding 8): the scheduler, its key and
// its inspect Service live in its own namespace, not kube-system: the one
// the code defaults to, which namespace.yaml creates with the label the key
// policy reads; the leader lease alone stays where the configurations put
// it.
func TestSchedulerNamespace(t *testing.T) {
	ns := documents(t, "manifests", "scheduler", "namespace.yaml")
	require.Len(t, ns, 1)
	var n corev1.Namespace
	require.NoError(t, sigsyaml.UnmarshalStrict(ns[0], &n))
	require.Equal(t, placement.DefaultNamespace, n.Name)
	require.NotEqual(t, "kube-system", n.Name)
	require.Equal(t, "true", n.Labels[schedulerNamespaceLabel], "the key policy's bulk-delete refusal reads it")

	var d appsv1.Deployment
	require.NoError(t, sigsyaml.UnmarshalStrict(documents(t, "manifests", "scheduler", "deployment.yaml")[0], &d))
	require.Equal(t, n.Name, d.Namespace, "the key's namespace is the Deployment's (POD_NAMESPACE)")
	for _, doc := range documents(t, "manifests", "inspect", "service-proxy.yaml") {
		var meta struct {
			Kind     string
			Metadata struct{ Namespace string }
		}
		require.NoError(t, sigsyaml.Unmarshal(doc, &meta))
		require.Equal(t, n.Name, meta.Metadata.Namespace, "%s: beside the scheduler's pods", meta.Kind)
	}

	var keyPolicy admissionv1.ValidatingAdmissionPolicy
	for _, doc := range documents(t, "manifests", "admission", "scheduler-secret-policy.yaml") {
		if kindOf(t, doc) == "ValidatingAdmissionPolicy" {
			var p admissionv1.ValidatingAdmissionPolicy
			require.NoError(t, sigsyaml.UnmarshalStrict(doc, &p))
			if p.Name == "hivesched-placement-key" {
				keyPolicy = p
			}
		}
	}
	raw, err := sigsyaml.Marshal(keyPolicy.Spec)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "kube-system", "the policy names no namespace")
	require.NotContains(t, string(raw), n.Name, "the policy names no namespace: the label says which")
	require.Contains(t, string(raw), schedulerNamespaceLabel)
}

// schedulerNamespaceLabel marks the namespace that holds the placement key.
const schedulerNamespaceLabel = "hivesched.io/scheduler-namespace"

// access is one permission: verb on group/resource, limited to a name ("" any).
type access struct{ group, resource, verb, name string }

// codeNeeds lists every API call hivesched's own code makes (grep
// plugins/ for ClientSet(), the VirtualCluster and AffinityGroup clients).
var codeNeeds = []access{
	{"hivesched.io", "virtualclusters", "get", ""},
	{"hivesched.io", "virtualclusters", "list", ""},
	{"hivesched.io", "virtualclusters", "watch", ""},
	{"hivesched.io", "virtualclusters/status", "update", ""},
	{"hivesched.io", "affinitygroups", "get", ""},
	{"hivesched.io", "affinitygroups", "list", ""},
	{"hivesched.io", "affinitygroups", "watch", ""},
	{"hivesched.io", "affinitygroups", "create", ""},
	{"hivesched.io", "affinitygroups", "delete", ""},
	{"hivesched.io", "affinitygroups/status", "update", ""},
	{"scheduling.x-k8s.io", "podgroups", "list", ""},
	{"scheduling.x-k8s.io", "podgroups", "watch", ""},
	// Workload API (GenericWorkload): the PodGroup and CompositePodGroup
	// informers are the scheduler's own; a PodGroup's Workload names its VC.
	{"scheduling.k8s.io", "podgroups", "list", ""},
	{"scheduling.k8s.io", "podgroups", "watch", ""},
	{"scheduling.k8s.io", "compositepodgroups", "list", ""},
	{"scheduling.k8s.io", "compositepodgroups", "watch", ""},
	{"scheduling.k8s.io", "workloads", "list", ""},
	{"scheduling.k8s.io", "workloads", "watch", ""},
	// GPU claims (DRA, plugins/dra): the claim and slice informers are the
	// scheduler's own; PreBind writes a claim's finalizer, allocation and
	// reservation (the binding subresource's check, granular status
	// authorization); a stale allocation is read and cleared.
	{"resource.k8s.io", "resourceclaims", "get", ""},
	{"resource.k8s.io", "resourceclaims", "list", ""},
	{"resource.k8s.io", "resourceclaims", "watch", ""},
	{"resource.k8s.io", "resourceclaims", "update", ""},
	{"resource.k8s.io", "resourceclaims/status", "update", ""},
	{"resource.k8s.io", "resourceclaims/binding", "update", ""},
	{"resource.k8s.io", "resourceslices", "list", ""},
	{"resource.k8s.io", "resourceslices", "watch", ""},
	{"", "pods", "get", ""},
	{"", "pods", "list", ""},
	{"", "pods", "watch", ""},
	{"", "pods", "delete", ""},
	{"", "pods", "patch", ""},
	{"", "pods/binding", "create", ""},
	{"", "secrets", "get", hivesched.PlacementKeySecret},
	{"", "secrets", "create", ""},
	{"coordination.k8s.io", "leases", "create", ""},
	{"coordination.k8s.io", "leases", "get", "hivesched"},
	{"coordination.k8s.io", "leases", "update", "hivesched"},
	{"coordination.k8s.io", "leases", "get", "default-scheduler"},
	{"coordination.k8s.io", "leases", "update", "default-scheduler"},
	// The inspect API's delegated authentication and authorization
	// (plugins/inspect/access.go): who asks, and whether they may.
	{"authentication.k8s.io", "tokenreviews", "create", ""},
	{"authorization.k8s.io", "subjectaccessreviews", "create", ""},
	// Not an API call: the admission policies (manifests/admission) ask
	// the authorizer whether the requester may write this virtual
	// resource; the grant makes the scheduler exempt, whatever its name.
	{"hivesched.io", "placements", "write", ""},
}

// inherited is what system:kube-scheduler grants of the above (Kubernetes'
// bootstrap policy), so rbac.yaml need not repeat it.
var inherited = []access{
	{"", "pods", "get", ""}, {"", "pods", "list", ""}, {"", "pods", "watch", ""}, {"", "pods", "delete", ""},
	{"", "pods/binding", "create", ""},
	{"coordination.k8s.io", "leases", "create", ""},
	// For kube-scheduler's own delegated authentication of its secure port.
	{"authentication.k8s.io", "tokenreviews", "create", ""}, {"authorization.k8s.io", "subjectaccessreviews", "create", ""},
	// DynamicResourceAllocation (GA) and granular claim status
	// authorization (beta, on).
	{"resource.k8s.io", "resourceclaims", "get", ""}, {"resource.k8s.io", "resourceclaims", "list", ""},
	{"resource.k8s.io", "resourceclaims", "watch", ""}, {"resource.k8s.io", "resourceclaims", "update", ""},
	{"resource.k8s.io", "resourceclaims/status", "update", ""}, {"resource.k8s.io", "resourceclaims/binding", "update", ""},
	{"resource.k8s.io", "resourceslices", "list", ""}, {"resource.k8s.io", "resourceslices", "watch", ""},
	// With GenericWorkload on in the API server (Kubernetes 1.36+).
	{"scheduling.k8s.io", "podgroups", "list", ""}, {"scheduling.k8s.io", "podgroups", "watch", ""},
	{"scheduling.k8s.io", "compositepodgroups", "list", ""}, {"scheduling.k8s.io", "compositepodgroups", "watch", ""},
}

func allows(rules []rbacv1.PolicyRule, a access) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, a.group) && slices.Contains(r.Resources, a.resource) && slices.Contains(r.Verbs, a.verb) &&
			(len(r.ResourceNames) == 0 || (a.name != "" && slices.Contains(r.ResourceNames, a.name))) {
			return true
		}
	}
	return false
}

// TestSchedulerRBAC: every call the code makes is granted (by rbac.yaml or
// the built-in scheduler role it binds), and rbac.yaml grants nothing else:
// no wildcard, no verb the code does not use, leases and the key by name.
func TestSchedulerRBAC(t *testing.T) {
	var clusterRules, nsRules []rbacv1.PolicyRule
	rulesIn := map[string][]rbacv1.PolicyRule{} // by the Role's namespace
	boundClusterRoles := map[string]bool{}
	sa := rbacv1.Subject{Kind: "ServiceAccount", Name: "hivesched-scheduler", Namespace: placement.DefaultNamespace}
	for _, doc := range documents(t, "manifests", "scheduler", "rbac.yaml") {
		switch kindOf(t, doc) {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			require.NoError(t, sigsyaml.UnmarshalStrict(doc, &r))
			clusterRules = append(clusterRules, r.Rules...)
		case "Role":
			var r rbacv1.Role
			require.NoError(t, sigsyaml.UnmarshalStrict(doc, &r))
			require.Contains(t, []string{"kube-system", placement.DefaultNamespace}, r.Namespace)
			nsRules = append(nsRules, r.Rules...)
			rulesIn[r.Namespace] = append(rulesIn[r.Namespace], r.Rules...)
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			require.NoError(t, sigsyaml.UnmarshalStrict(doc, &b))
			require.Equal(t, []rbacv1.Subject{sa}, b.Subjects)
			boundClusterRoles[b.RoleRef.Name] = true
		case "RoleBinding":
			var b rbacv1.RoleBinding
			require.NoError(t, sigsyaml.UnmarshalStrict(doc, &b))
			require.Contains(t, []string{"kube-system", placement.DefaultNamespace}, b.Namespace)
			require.Equal(t, []rbacv1.Subject{sa}, b.Subjects)
		case "ServiceAccount":
			var a corev1.ServiceAccount
			require.NoError(t, sigsyaml.UnmarshalStrict(doc, &a))
			require.Equal(t, placement.DefaultNamespace, a.Namespace)
		default:
			t.Fatalf("unexpected kind in rbac.yaml: %s", kindOf(t, doc))
		}
	}
	require.True(t, boundClusterRoles["system:kube-scheduler"])
	require.True(t, boundClusterRoles["system:volume-scheduler"])
	require.True(t, boundClusterRoles["hivesched-scheduler"])
	// The key is read and created in the scheduler's namespace only
	// (issue 28, 8); in kube-system, only the leader lease.
	require.True(t, allows(rulesIn[placement.DefaultNamespace], access{"", "secrets", "get", hivesched.PlacementKeySecret}))
	for _, r := range rulesIn["kube-system"] {
		require.Equal(t, []string{"leases"}, r.Resources, "only the lease in kube-system")
	}

	for _, need := range codeNeeds {
		ok := slices.Contains(inherited, need) || allows(clusterRules, need) ||
			(need.group != "hivesched.io" && allows(nsRules, need))
		require.True(t, ok, "not granted: %+v", need)
	}
	// Nothing beyond what the code needs, and nothing twice.
	for _, rules := range [][]rbacv1.PolicyRule{clusterRules, nsRules} {
		for _, r := range rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						require.NotContains(t, []string{g, res, v}, "*", "no wildcards")
						names := r.ResourceNames
						if len(names) == 0 {
							names = []string{""}
						}
						for _, n := range names {
							a := access{g, res, v, n}
							require.True(t, slices.Contains(codeNeeds, a), "granted but not used by the code: %+v", a)
							require.False(t, slices.Contains(inherited, a), "already granted by system:kube-scheduler: %+v", a)
						}
					}
				}
			}
		}
	}
}

// TestAdmissionManifests: the policies parse as the API types, each has a
// binding that denies, and the exemptions name the scheduler's account.
func TestAdmissionManifests(t *testing.T) {
	policies := map[string]admissionv1.ValidatingAdmissionPolicy{}
	bindings := map[string]admissionv1.ValidatingAdmissionPolicyBinding{}
	files, err := filepath.Glob(filepath.Join("..", "..", "manifests", "admission", "*.yaml"))
	require.NoError(t, err)
	for _, path := range files {
		f := filepath.Base(path)
		for _, doc := range documents(t, "manifests", "admission", f) {
			switch kindOf(t, doc) {
			case "ValidatingAdmissionPolicy":
				var p admissionv1.ValidatingAdmissionPolicy
				require.NoError(t, sigsyaml.UnmarshalStrict(doc, &p))
				policies[p.Name] = p
			case "ValidatingAdmissionPolicyBinding":
				var b admissionv1.ValidatingAdmissionPolicyBinding
				require.NoError(t, sigsyaml.UnmarshalStrict(doc, &b))
				bindings[b.Spec.PolicyName] = b
			case "ConfigMap":
				// The parameters of a policy (checked with its binding).
			default:
				t.Fatalf("%s: unexpected kind %s", f, kindOf(t, doc))
			}
		}
	}
	require.Len(t, policies, 5)
	for name, p := range policies {
		require.Equal(t, admissionv1.Fail, *p.Spec.FailurePolicy, name)
		require.NotEmpty(t, p.Spec.Validations, name)
		// Who the scheduler is comes from RBAC (a virtual resource of
		// group hivesched.io), never from an identity written in the
		// policy: the scheduler may run under any name (issue 28, 10).
		conds := ""
		for _, c := range p.Spec.MatchConditions {
			conds += c.Expression
		}
		require.NotContains(t, conds, "system:serviceaccount:", name)
		if name == "hivesched-node-verdicts" {
			// It matches the nodes' own identities (issue 28, 4).
			require.Equal(t, "'system:nodes' in request.userInfo.groups", conds)
		} else {
			require.Contains(t, conds, "authorizer.group('hivesched.io')", name)
		}
		b, ok := bindings[name]
		require.True(t, ok, "policy %s has a binding", name)
		require.Equal(t, []admissionv1.ValidationAction{admissionv1.Deny}, b.Spec.ValidationActions)
		if p.Spec.ParamKind != nil {
			require.NotNil(t, b.Spec.ParamRef, name)
			require.Equal(t, admissionv1.DenyAction, *b.Spec.ParamRef.ParameterNotFoundAction, "%s fails closed without its parameters", name)
		}
	}
	pp := policies["hivesched-pod-placement"]
	var records string
	for _, v := range pp.Spec.Variables {
		if v.Name == "records" {
			records = v.Expression
		}
	}
	for _, a := range []string{hivesched.AnnotationPlacement, hivesched.AnnotationPlacementSignature, hivesched.AnnotationLeafCellIndices, hivesched.HivedIsolationAnnotation} {
		require.Contains(t, records, a, "every annotation the scheduler writes at bind is its own")
	}
	require.ElementsMatch(t, []string{"pods", "pods/status", "pods/binding"}, pp.Spec.MatchConstraints.ResourceRules[0].Resources)
}
