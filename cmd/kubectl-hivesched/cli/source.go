// Package cli is kubectl-hivesched: commands that read hivesched's inspect
// API (apis/inspect/v1) and print or draw what they read, and serve its
// dashboard locally.
package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
)

// source answers GET requests of the inspect API: path is relative to
// /v1/inspect/ ("cells?vc=a").
type source interface {
	get(ctx context.Context, path string) ([]byte, error)
}

// upstream is the scheduler's inspect server, reached directly (a
// port-forward, or the scheduler's host) or through the API server's
// service proxy; its client sends the kubeconfig's credentials.
type upstream struct {
	client *http.Client
	// base + "/v1/inspect/cells" is an endpoint, base + "/dashboard/" the page.
	base  string
	where string // for messages
	proxy bool   // through the API server's service proxy
}

// do sends one GET (or HEAD) of path (absolute: "/v1/inspect/cells?vc=a",
// "/dashboard/app.js") with the given headers.
func (u upstream) do(ctx context.Context, method, path string, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.base+path, nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := u.client.Do(req)
	if err != nil {
		if u.proxy {
			return nil, fmt.Errorf("reading the inspect API through the API server's proxy of %s: %w; apply manifests/inspect/service-proxy.yaml and set inspectBindAddress \":10262\", or use --inspect-url with a port-forward (docs/inspect.md)", u.where, err)
		}
		return nil, fmt.Errorf("reading %s: %w (is the inspect API on? inspectBindAddress in the scheduler's HiveSched args; docs/inspect.md)", u.base+path, err)
	}
	return resp, nil
}

func (u upstream) get(ctx context.Context, path string) ([]byte, error) {
	resp, err := u.do(ctx, http.MethodGet, iv1.PathPrefix+path, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, apiError(u.where, resp.StatusCode, body)
	}
	return body, nil
}

// fileSource answers every request with one saved answer of the API (for
// example `curl .../v1/inspect/cells > cells.json`).
type fileSource struct{ path string }

func (s fileSource) get(context.Context, string) ([]byte, error) {
	return os.ReadFile(s.path)
}

func apiError(where string, code int, body []byte) error {
	var e iv1.Error
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	switch code {
	case http.StatusUnauthorized:
		return fmt.Errorf("%s: %s (the inspect API takes a bearer token: a kubeconfig that authenticates with a client certificate sends none; "+
			"pass --token, for example of a service account bound to hivesched-inspect-admin: docs/inspect.md)", where, msg)
	case http.StatusForbidden:
		return fmt.Errorf("%s: %s", where, msg)
	case 0, http.StatusOK:
		return fmt.Errorf("%s: %s", where, msg)
	}
	return fmt.Errorf("%s: HTTP %d: %s", where, code, msg)
}

// options are the flags every command shares.
type options struct {
	kube       *genericclioptions.ConfigFlags
	inspectURL string
	fromFile   string
	namespace  string // of the scheduler's Service
	service    string
	port       int
	timeout    time.Duration
	errOut     io.Writer
}

func (o *options) source() (source, error) {
	if o.fromFile != "" {
		return fileSource{o.fromFile}, nil
	}
	u, err := o.upstream(o.timeout)
	if err != nil {
		return nil, err
	}
	return u, nil
}

// upstream reaches the scheduler: --inspect-url, or the API server's
// service proxy of the scheduler's Service. Either way with the
// kubeconfig's credentials (and --token): the inspect API authenticates
// every request by its bearer token.
func (o *options) upstream(timeout time.Duration) (upstream, error) {
	cfg, cfgErr := o.kube.ToRESTConfig()
	if o.inspectURL != "" {
		base := strings.TrimSuffix(o.inspectURL, "/")
		if cfgErr != nil {
			cfg = &rest.Config{}
		}
		direct := rest.CopyConfig(cfg)
		direct.Host = base
		if o.kube.BearerToken != nil && *o.kube.BearerToken != "" {
			// Without a kubeconfig, kubectl's overrides drop --token: it
			// authenticates alone.
			direct.BearerToken, direct.BearerTokenFile, direct.ExecProvider, direct.AuthProvider = *o.kube.BearerToken, "", nil, nil
		}
		if u, err := url.Parse(base); err == nil && u.Scheme == "http" && !loopback(u.Hostname()) && o.errOut != nil &&
			(direct.BearerToken != "" || direct.BearerTokenFile != "" || direct.ExecProvider != nil || direct.AuthProvider != nil) {
			fmt.Fprintf(o.errOut, "warning: sending your credentials over plain HTTP to %s: use it through a port-forward or the API server's proxy\n", base)
		}
		client, err := rest.HTTPClientFor(direct)
		if err != nil {
			return upstream{}, err
		}
		client.Timeout = timeout
		return upstream{client: client, base: base, where: base}, nil
	}
	if cfgErr != nil {
		return upstream{}, fmt.Errorf("no kubeconfig to reach the API server's service proxy (%w); or use --inspect-url", cfgErr)
	}
	proxied := rest.CopyConfig(cfg)
	// The API server takes Authorization for itself: the same token goes
	// on in the header the inspect API also reads.
	proxied.Wrap(func(rt http.RoundTripper) http.RoundTripper { return tokenCopier{rt} })
	client, err := rest.HTTPClientFor(proxied)
	if err != nil {
		return upstream{}, err
	}
	client.Timeout = timeout
	host, err := url.Parse(cfg.Host)
	if err != nil || host.Scheme == "" {
		host, err = url.Parse("https://" + cfg.Host)
		if err != nil {
			return upstream{}, err
		}
	}
	base := strings.TrimSuffix(host.String(), "/") + fmt.Sprintf("/api/v1/namespaces/%s/services/http:%s:%d/proxy",
		url.PathEscape(o.namespace), url.PathEscape(o.service), o.port)
	return upstream{client: client, base: base, where: fmt.Sprintf("service %s/%s:%d", o.namespace, o.service, o.port), proxy: true}, nil
}

// tokenCopier copies the request's bearer token into the header the
// inspect API reads behind the API server's proxy.
type tokenCopier struct{ next http.RoundTripper }

func (t tokenCopier) RoundTrip(r *http.Request) (*http.Response, error) {
	if v := r.Header.Get("Authorization"); strings.HasPrefix(v, "Bearer ") && r.Header.Get(iv1.AuthorizationHeader) == "" {
		r = r.Clone(r.Context())
		r.Header.Set(iv1.AuthorizationHeader, v)
	}
	return t.next.RoundTrip(r)
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// fetch reads path and decodes it into v.
func fetch(ctx context.Context, src source, path string, v any) error {
	body, err := src.get(ctx, path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("the answer to %s is not what the inspect API returns: %w", path, err)
	}
	return nil
}
