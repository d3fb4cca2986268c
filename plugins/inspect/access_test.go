package inspect

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
	"github.com/hivesched/hivesched/plugins/cellcore"
)

// testAccess stands for the API server's reviews: a token is its user's
// name; "admin" may do anything, "tenant" may get inspect.hivesched.io and
// list pods in namespace "ns", "stranger" nothing.
func testAccess() Access {
	return Access{
		Authenticator: alsoFromProxyHeader(authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
			tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || tok == "" || tok == "bad" {
				return nil, false, nil
			}
			return &authenticator.Response{User: &user.DefaultInfo{Name: tok}}, true, nil
		})),
		Authorizer: authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
			switch a.GetUser().GetName() {
			case "admin":
				return authorizer.DecisionAllow, "", nil
			case "tenant":
				if a.GetAPIGroup() == iv1.AuthorizationGroup && a.GetResource() == iv1.AuthorizationResource && a.GetVerb() == "get" {
					return authorizer.DecisionAllow, "", nil
				}
				if a.GetResource() == "pods" && a.GetVerb() == "list" && a.GetNamespace() == "ns" {
					return authorizer.DecisionAllow, "", nil
				}
			}
			return authorizer.DecisionNoOpinion, "", nil
		}),
	}
}

func asUser(r *http.Request, token string) *http.Request {
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}

// get serves one request as the user and decodes a 200 answer into out.
func get(t *testing.T, h http.Handler, token, path string, out any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if token != "" {
		asUser(req, token)
	}
	h.ServeHTTP(rec, req)
	if rec.Code == http.StatusOK && out != nil {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), out), rec.Body.String())
	}
	if rec.Code != http.StatusOK && out != nil {
		if e, ok := out.(*iv1.Error); ok {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), e), rec.Body.String())
		}
	}
	return rec.Code
}

// Issue 28, item 6: the inspect API answers only authenticated callers who
// may get inspect.hivesched.io, and shows a tenant only the groups and pods
// of the namespaces where it may list pods, naming no other group anywhere.
func TestAccess(t *testing.T) {
	p := testServer(t, 16)
	// Another namespace's gang in VC b and a waiting one of "ns" in VC b,
	// which waits for it.
	place(t, p.core, cellcore.AffinityGroupSpec{Name: "other/secret", VirtualCluster: "b", Priority: 5,
		Members: []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 8}}})
	d, err := p.core.Schedule(cellcore.AffinityGroupSpec{Name: "ns/big", VirtualCluster: "b", Priority: 0,
		Members: []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}}})
	require.NoError(t, err)
	require.Equal(t, cellcore.Wait, d.Kind)
	h := p.Handler()

	var e iv1.Error
	require.Equal(t, http.StatusUnauthorized, get(t, h, "", iv1.PathPrefix+"cells", &e), "no credentials")
	require.Contains(t, e.Error, "authentication required")
	require.Equal(t, http.StatusUnauthorized, get(t, h, "bad", iv1.PathPrefix+"cells", &e), "a token the API server does not know")
	require.Equal(t, http.StatusForbidden, get(t, h, "stranger", iv1.PathPrefix+"cells", &e), "authenticated, not authorized")
	require.Contains(t, e.Error, "stranger may not get inspect.hivesched.io")
	require.Equal(t, http.StatusForbidden, get(t, h, "stranger", iv1.DashboardPath, nil), "the dashboard has the same rules")
	require.Equal(t, http.StatusUnauthorized, get(t, h, "", iv1.DashboardPath, nil))

	// Through the API server's proxy the token comes in the other header.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, iv1.PathPrefix+"virtualclusters", nil)
	req.Header.Set(iv1.AuthorizationHeader, "Bearer admin")
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())

	// The admin sees every group.
	var groups []iv1.AffinityGroup
	require.Equal(t, http.StatusOK, get(t, h, "admin", iv1.PathPrefix+"affinitygroups", &groups))
	names := map[string]bool{}
	for _, g := range groups {
		names[g.Name] = true
	}
	require.True(t, names["other/secret"])

	// The tenant sees its namespace's groups only...
	require.Equal(t, http.StatusOK, get(t, h, "tenant", iv1.PathPrefix+"affinitygroups", &groups))
	require.NotEmpty(t, groups)
	for _, g := range groups {
		require.True(t, strings.HasPrefix(g.Name, "ns/"), g.Name)
	}
	require.Equal(t, http.StatusForbidden, get(t, h, "tenant", iv1.PathPrefix+"affinitygroups/other/secret", &e))
	require.Contains(t, e.Error, `may not list pods in namespace "other"`)
	require.Equal(t, http.StatusForbidden, get(t, h, "tenant", iv1.PathPrefix+"pods/other/secret-0", &e))
	// ... and its waiting group's reason and holders without the other
	// namespace's group names.
	var big iv1.AffinityGroup
	require.Equal(t, http.StatusOK, get(t, h, "admin", iv1.PathPrefix+"affinitygroups/ns/big", &big))
	require.Contains(t, big.Reason, "ns/big")
	require.Contains(t, big.Reason, "(other/secret, ns/b-0 and ns/b-1)")
	require.Equal(t, http.StatusOK, get(t, h, "tenant", iv1.PathPrefix+"affinitygroups/ns/big", &big))
	require.Contains(t, big.Reason, "ns/big", "its own name stays")
	require.Contains(t, big.Reason, "("+hiddenGroup+", ns/b-0 and ns/b-1)")
	// The cells: the other namespace's group is gone from the leaves it
	// uses, which stay Used.
	used := func(c *iv1.Cell) bool { return c.State == "Used" }
	var cells, adminCells iv1.ClusterCells
	require.Equal(t, http.StatusOK, get(t, h, "tenant", iv1.PathPrefix+"cells", &cells))
	require.Equal(t, http.StatusOK, get(t, h, "admin", iv1.PathPrefix+"cells", &adminCells))
	require.Zero(t, countLeaves(cells.Chains[0].Cells, func(c *iv1.Cell) bool { return c.Group == "other/secret" }))
	require.Equal(t, 8, countLeaves(adminCells.Chains[0].Cells, func(c *iv1.Cell) bool { return c.Group == "other/secret" }))
	require.Equal(t, 48, countLeaves(cells.Chains[0].Cells, used))
	require.Equal(t, 48, countLeaves(adminCells.Chains[0].Cells, used))
	// The cached tree is not changed by a tenant's view of it.
	require.Equal(t, http.StatusOK, get(t, h, "tenant", iv1.PathPrefix+"cells", &cells))
	require.Equal(t, http.StatusOK, get(t, h, "admin", iv1.PathPrefix+"cells", &cells))
	require.Equal(t, 8, countLeaves(cells.Chains[0].Cells, func(c *iv1.Cell) bool { return c.Group == "other/secret" }))

	// Events: a tenant sees those of its namespaces, names redacted.
	p.events.Note(podIn("other", "secret-0"), "Normal", "Preempted", "preempted by affinity group ns/big (whole group other/secret is deleted)")
	p.events.Note(podIn("ns", "a-0-0"), "Normal", "LazilyPreempted", "affinity group ns/a-0 was lazily preempted by affinity group other/secret (priority 5)")
	var events []iv1.Event
	require.Equal(t, http.StatusOK, get(t, h, "tenant", iv1.PathPrefix+"events", &events))
	require.Len(t, events, 1)
	require.Equal(t, "ns/a-0-0", events[0].Object)
	require.Equal(t, "affinity group ns/a-0 was lazily preempted by affinity group "+hiddenGroup+" (priority 5)", events[0].Message)
	require.Equal(t, http.StatusOK, get(t, h, "admin", iv1.PathPrefix+"events", &events))
	require.Len(t, events, 2)

	// Write methods are refused whoever asks.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, asUser(httptest.NewRequest(http.MethodPost, iv1.PathPrefix+"cells", nil), "admin"))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

func podIn(ns, name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}
