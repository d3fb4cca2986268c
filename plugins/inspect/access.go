package inspect

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
)

// Access is who may read the inspect API and the dashboard, and what each
// caller sees (docs/inspect.md, "Who may read it"):
//
//   - every request carries a bearer token, in Authorization or (through the
//     API server's service proxy, which keeps Authorization) in
//     X-Hivesched-Authorization; the API server reviews it (TokenReview):
//     the scheduler's delegated authentication;
//   - the caller may get the virtual resource inspect.hivesched.io
//     (a SubjectAccessReview), or is refused;
//   - a caller who may list inspect.hivesched.io sees every namespace's
//     groups and pods; any other sees those of the namespaces where it may
//     list pods, and other namespaces' group names nowhere (cells, reasons,
//     holders and events say "a group of another namespace").
//
// Answers are cached by the API server's clients for CacheTTL, so a page
// polling every few seconds costs the API server a review every CacheTTL.
type Access struct {
	Authenticator authenticator.Request
	Authorizer    authorizer.Authorizer
}

// CacheTTL is how long a token review or an access review is remembered.
const CacheTTL = 10 * time.Second

// DelegatedAccess reviews tokens and access with the API server, through
// its own client of cfg (a few requests per second at most, so that a
// crowd of callers cannot eat the scheduler's own rate limit).
func DelegatedAccess(cfg *rest.Config) (Access, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 5, 10
	kube, err := kubernetes.NewForConfig(c)
	if err != nil {
		return Access{}, err
	}
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 3}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient:  kube.AuthenticationV1(),
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      &backoff,
		CacheTTL:                 CacheTTL,
	}.New()
	if err != nil {
		return Access{}, fmt.Errorf("inspect API authentication: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: kube.AuthorizationV1(),
		AllowCacheTTL:             CacheTTL,
		DenyCacheTTL:              CacheTTL,
		WebhookRetryBackoff:       &backoff,
	}.New()
	if err != nil {
		return Access{}, fmt.Errorf("inspect API authorization: %w", err)
	}
	return Access{Authenticator: alsoFromProxyHeader(authn), Authorizer: authz}, nil
}

// alsoFromProxyHeader reads the token from X-Hivesched-Authorization when
// the request has no Authorization (it came through the service proxy).
func alsoFromProxyHeader(a authenticator.Request) authenticator.Request {
	return authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
		if r.Header.Get("Authorization") == "" {
			if v := r.Header.Get(iv1.AuthorizationHeader); v != "" {
				r = r.Clone(r.Context())
				r.Header.Set("Authorization", v)
			}
		}
		return a.AuthenticateRequest(r)
	})
}

// viewer is an authorized caller and what it may see.
type viewer struct {
	ctx   context.Context
	user  user.Info
	authz authorizer.Authorizer
	all   bool // may list inspect.hivesched.io: every namespace

	mu sync.Mutex
	ns map[string]bool // namespaces asked about: may list pods there
}

// admit authenticates and authorizes a request: the viewer, or the status
// and message of the refusal.
func (a Access) admit(r *http.Request) (*viewer, int, string) {
	if a.Authenticator == nil || a.Authorizer == nil {
		return nil, http.StatusUnauthorized, "the inspect API has no authenticator: it answers nobody"
	}
	resp, ok, err := a.Authenticator.AuthenticateRequest(r)
	if err != nil || !ok {
		msg := "authentication required: send a bearer token (Authorization, or " + iv1.AuthorizationHeader + " through the API server's proxy); kubectl hivesched sends your kubeconfig's"
		if err != nil {
			msg += fmt.Sprintf(" (%v)", err)
		}
		return nil, http.StatusUnauthorized, msg
	}
	v := &viewer{ctx: r.Context(), user: resp.User, authz: a.Authorizer, ns: map[string]bool{}}
	if !v.allowed("get", "", iv1.AuthorizationGroup, iv1.AuthorizationResource) {
		return nil, http.StatusForbidden, fmt.Sprintf("%s may not get %s.%s (the inspect API): ask for the ClusterRole hivesched-inspect-viewer (manifests/inspect)",
			v.user.GetName(), iv1.AuthorizationResource, iv1.AuthorizationGroup)
	}
	v.all = v.allowed("list", "", iv1.AuthorizationGroup, iv1.AuthorizationResource)
	return v, 0, ""
}

func (v *viewer) allowed(verb, namespace, group, resource string) bool {
	d, _, err := v.authz.Authorize(v.ctx, authorizer.AttributesRecord{User: v.user, Verb: verb, Namespace: namespace,
		APIGroup: group, APIVersion: "*", Resource: resource, ResourceRequest: true})
	return err == nil && d == authorizer.DecisionAllow
}

// sees reports whether the viewer may see the groups and pods of ns.
func (v *viewer) sees(ns string) bool {
	if v == nil || v.all {
		return true
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	ok, asked := v.ns[ns]
	if !asked {
		ok = ns != "" && v.allowed("list", ns, "", "pods")
		v.ns[ns] = ok
	}
	return ok
}

// seesGroup: the group's namespace (its name is namespace/name).
func (v *viewer) seesGroup(group string) bool {
	if v == nil || v.all || group == "" {
		return true
	}
	ns, _, _ := strings.Cut(group, "/")
	return v.sees(ns)
}

// hiddenGroup stands for the name of a group the viewer may not see.
const hiddenGroup = "(another namespace's group)"

// groupName is the group's name, or hiddenGroup.
func (v *viewer) groupName(group string) string {
	if v.seesGroup(group) {
		return group
	}
	return hiddenGroup
}

// groupNameLike matches what may be a group's name (namespace/name) in a
// sentence; redact replaces those that are known groups the viewer may
// not see.
var groupNameLike = regexp.MustCompile(`[a-z0-9][-a-z0-9]*/[^\s,;:()"']*[^\s,;:()"'.]`)

func (v *viewer) redact(text string, known func(string) bool) string {
	if v == nil || v.all || text == "" {
		return text
	}
	return groupNameLike.ReplaceAllStringFunc(text, func(m string) string {
		if known(m) && !v.seesGroup(m) {
			return hiddenGroup
		}
		return m
	})
}
