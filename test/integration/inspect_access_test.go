package integration

import (
	"bytes"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
	"github.com/hivesched/hivesched/cmd/kubectl-hivesched/cli"
)

// saToken creates a service account and returns a token of it (the
// TokenRequest API: what `kubectl create token` asks).
func (c *cluster) saToken(t *testing.T, ns, name string) string {
	t.Helper()
	_, err := c.kube.CoreV1().ServiceAccounts(ns).Create(t.Context(), &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := c.kube.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

// kubeconfigWithToken is a kubeconfig of the cluster that authenticates
// with token only.
func (c *cluster) kubeconfigWithToken(t *testing.T, token string) string {
	cfg := rest.AnonymousClientConfig(c.cfg)
	cfg.BearerToken = token
	return writeKubeconfig(t, cfg)
}

func (c *cluster) bindClusterRole(t *testing.T, role, ns, sa string) {
	_, err := c.kube.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role + "-" + ns + "-" + sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func (c *cluster) bindRole(t *testing.T, inNS, kind, role, ns, sa string) {
	_, err := c.kube.RbacV1().RoleBindings(inNS).Create(t.Context(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role + "-" + ns + "-" + sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// waitAllowed waits until the API server lets user do verb on resource.
func (c *cluster) waitAllowed(t *testing.T, user, verb, ns, group, resource string) {
	t.Helper()
	require.Eventually(t, func() bool {
		r, err := c.kube.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource}}}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed
	}, 20*time.Second, 100*time.Millisecond, "%s may %s %s.%s in %q", user, verb, resource, group, ns)
}

// khsWith runs kubectl hivesched with a kubeconfig and returns its output
// and error.
func khsWith(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := cli.NewCommand(&out, &errOut)
	cmd.SetArgs(append(args, "--kubeconfig", kubeconfig, "--timeout", "20s"))
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

// hostIP is an IPv4 address of this machine other than loopback (the API
// server's service proxy refuses endpoints on loopback), or "".
func hostIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
			return ipn.IP.String()
		}
	}
	return ""
}

// TestInspectAccess (issue 28, item 6): on an API server that enforces
// RBAC, with manifests/inspect/rbac.yaml, the inspect API and the
// dashboard answer only callers the API server authenticates and lets get
// inspect.hivesched.io; a tenant sees its own namespace's groups and pods
// and no other namespace's group names; an operator sees everything; and
// `kubectl hivesched` works for both, directly and through the API
// server's service proxy (the token travels in X-Hivesched-Authorization,
// as the proxy keeps Authorization).
func TestInspectAccess(t *testing.T) {
	c := startCluster(t, "--authorization-mode=Node,RBAC")
	c.applyManifest(t, "manifests/inspect/rbac.yaml")
	c.createNodes(t, "acc", 1, 2, 0)
	c.createNamespace(t, "team-a")
	c.createNamespace(t, "team-b")
	c.createVC(t, "acc-vc", []string{"team-a", "team-b"}, "V100-NODE", 1)
	host := hostIP()
	bind := "127.0.0.1"
	if host != "" {
		bind = host
	}
	port := freePort(t, bind)
	addr := net.JoinHostPort(bind, strconv.Itoa(port))
	c.startScheduler(t, physicalCluster("acc", 1, 2, 0), withInspect(addr))

	secret := gangPods("team-b", "secret", "acc-vc", 5, 1, 8)
	c.createPods(t, secret)
	c.waitBound(t, secret, 30*time.Second)
	want := gangPods("team-a", "want", "acc-vc", 0, 1, 8)
	c.createPods(t, want)
	c.failedScheduling(t, want[0], "team-a/want", 30*time.Second)

	ops := c.saToken(t, "kube-system", "ops")
	c.bindClusterRole(t, "hivesched-inspect-admin", "kube-system", "ops")
	alice := c.saToken(t, "team-a", "alice")
	c.bindClusterRole(t, "hivesched-inspect-viewer", "team-a", "alice")
	// A tenant's usual rights in its namespace (the built-in "view" is
	// filled by kube-controller-manager, which this test does not run).
	_, err := c.kube.RbacV1().Roles("team-a").Create(t.Context(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	c.bindRole(t, "team-a", "Role", "pod-reader", "team-a", "alice")
	mallory := c.saToken(t, "team-a", "mallory")
	// RBAC takes the bindings from its informers: wait until it has them
	// (the scheduler remembers a denial for inspect.CacheTTL).
	c.waitAllowed(t, "system:serviceaccount:team-a:alice", "list", "team-a", "", "pods")
	c.waitAllowed(t, "system:serviceaccount:team-a:alice", "get", "", "hivesched.io", "inspect")
	c.waitAllowed(t, "system:serviceaccount:kube-system:ops", "list", "", "hivesched.io", "inspect")

	var e iv1.Error
	var resp *http.Response
	require.Equal(t, http.StatusUnauthorized, inspectGetAs(t, "", addr, "cells", &e), "no token")
	require.Equal(t, http.StatusUnauthorized, inspectGetAs(t, "not-a-token", addr, "cells", &e), "a token the API server does not know")
	require.Equal(t, http.StatusForbidden, inspectGetAs(t, mallory, addr, "cells", &e), "authenticated, not granted")
	require.Contains(t, e.Error, "may not get inspect.hivesched.io")
	resp, err = http.Get("http://" + addr + iv1.DashboardPath)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the dashboard has the same rules")

	// The operator sees every namespace's groups and the reason in full.
	var groups []iv1.AffinityGroup
	require.Equal(t, http.StatusOK, inspectGetAs(t, ops, addr, "affinitygroups?all=true", &groups))
	names := func(gs []iv1.AffinityGroup) (out []string) {
		for _, g := range gs {
			out = append(out, g.Name)
		}
		return out
	}
	require.Contains(t, names(groups), "team-b/secret")
	var why iv1.PodExplanation
	require.Equal(t, http.StatusOK, inspectGetAs(t, ops, addr, "pods/team-a/"+want[0].Name, &why))
	require.Contains(t, why.Summary, "team-b/secret")

	// The tenant: its namespace's groups, no other names anywhere.
	require.Equal(t, http.StatusOK, inspectGetAs(t, alice, addr, "affinitygroups?all=true", &groups))
	require.Equal(t, []string{"team-a/want"}, names(groups))
	require.NotEmpty(t, groups[0].Reason, "the waiting group's one sentence")
	require.NotContains(t, groups[0].Reason, "team-b")
	require.Equal(t, http.StatusOK, inspectGetAs(t, alice, addr, "pods/team-a/"+want[0].Name, &why))
	require.NotContains(t, why.Summary, "team-b")
	require.NotEmpty(t, why.Holders)
	for _, h := range why.Holders {
		require.NotContains(t, h.Group, "team-b")
	}
	require.Equal(t, http.StatusForbidden, inspectGetAs(t, alice, addr, "pods/team-b/"+secret[0].Name, &e))
	require.Equal(t, http.StatusForbidden, inspectGetAs(t, alice, addr, "affinitygroups/team-b/secret", &e))
	var cells iv1.ClusterCells
	require.Equal(t, http.StatusOK, inspectGetAs(t, alice, addr, "cells", &cells))
	require.Zero(t, leavesOf(cells.Chains[0].Cells, func(c *iv1.Cell) bool { return strings.HasPrefix(c.Group, "team-b/") }))
	require.Equal(t, 8, leavesOf(cells.Chains[0].Cells, func(c *iv1.Cell) bool { return c.State == "Used" }), "the cells stay, used")

	// kubectl hivesched with each identity, directly.
	direct := []string{"--inspect-url", "http://" + addr}
	out, err := khsWith(t, c.kubeconfigWithToken(t, alice), append([]string{"groups"}, direct...)...)
	require.NoError(t, err)
	require.Contains(t, out, "team-a/want")
	require.NotContains(t, out, "team-b")
	_, err = khsWith(t, c.kubeconfigWithToken(t, alice), append([]string{"why", "team-b/" + secret[0].Name}, direct...)...)
	require.ErrorContains(t, err, `may not list pods in namespace "team-b"`)
	_, err = khsWith(t, c.kubeconfigWithToken(t, mallory), append([]string{"vcs"}, direct...)...)
	require.ErrorContains(t, err, "may not get inspect.hivesched.io")

	t.Run("through the API server's service proxy", func(t *testing.T) {
		if host == "" {
			t.Skip("no non-loopback IPv4 address: the API server proxies to no endpoint on loopback")
		}
		// The shipped Service and reader Role; the Service then points at
		// this process (no kubelet, no pod IP: an EndpointSlice by hand).
		// In the scheduler's namespace, which kubectl hivesched asks by
		// default.
		const schedNS = "hivesched-system"
		c.applyManifest(t, "manifests/inspect/service-proxy.yaml")
		svc, err := c.kube.CoreV1().Services(schedNS).Get(t.Context(), "hivesched-inspect", metav1.GetOptions{})
		require.NoError(t, err)
		svc.Spec.Selector = nil
		svc.Spec.Ports[0].TargetPort = intstr.FromInt32(int32(port))
		_, err = c.kube.CoreV1().Services(schedNS).Update(t.Context(), svc, metav1.UpdateOptions{})
		require.NoError(t, err)
		// The API server proxies only to a pod's IP: a pod standing for the
		// scheduler's, with this machine's address.
		pod, err := c.kube.CoreV1().Pods(schedNS).Create(t.Context(), &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "hivesched-scheduler-standin", Labels: map[string]string{"app": "hivesched-scheduler"}},
			Spec:       v1.PodSpec{NodeName: "acc-r0-n0", Containers: []v1.Container{{Name: "c", Image: "none"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		pod.Status.PodIP, pod.Status.PodIPs = host, []v1.PodIP{{IP: host}}
		_, err = c.kube.CoreV1().Pods(schedNS).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{})
		require.NoError(t, err)
		_, err = c.kube.DiscoveryV1().EndpointSlices(schedNS).Create(t.Context(), &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "hivesched-inspect-test", Labels: map[string]string{discoveryv1.LabelServiceName: "hivesched-inspect"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: schedNS, Name: pod.Name}}},
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("inspect"), Port: ptr.To(int32(port)), Protocol: ptr.To(v1.ProtocolTCP)}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		c.bindRole(t, schedNS, "Role", "hivesched-inspect-reader", "team-a", "alice")
		c.bindRole(t, schedNS, "Role", "hivesched-inspect-reader", "kube-system", "ops")

		var out string
		require.Eventually(t, func() bool {
			out, err = khsWith(t, c.kubeconfigWithToken(t, ops), "groups")
			return err == nil
		}, 20*time.Second, 200*time.Millisecond, "through the proxy: %v", err)
		require.Contains(t, out, "team-b/secret", "the operator sees every group")
		require.Eventually(t, func() bool {
			out, err = khsWith(t, c.kubeconfigWithToken(t, alice), "groups")
			return err == nil
		}, 20*time.Second, 200*time.Millisecond, "alice through the proxy: %v", err)
		require.Contains(t, out, "team-a/want")
		require.NotContains(t, out, "team-b", "the scheduler knew it was alice: her view")
		_, err = khsWith(t, c.kubeconfigWithToken(t, mallory), "groups")
		require.Error(t, err, "mallory may not use the proxy")
	})
}

// freePort is a port nobody listens on now at ip.
func freePort(t *testing.T, ip string) int {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}
