// Package cli is kubectl-hivesched: commands that read hivesched's inspect
// API (apis/inspect/v1) and print or draw what they read.
package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
)

// source answers GET requests of the inspect API: path is relative to
// /v1/inspect/ ("cells?vc=a").
type source interface {
	get(ctx context.Context, path string) ([]byte, error)
}

// urlSource reads the API directly (a port-forward, or the scheduler's host).
type urlSource struct {
	base   string
	client *http.Client
}

func (s urlSource) get(ctx context.Context, path string) ([]byte, error) {
	u := strings.TrimSuffix(s.base, "/") + iv1.PathPrefix + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w (is the inspect API on? inspectBindAddress in the scheduler's HiveSched args; docs/inspect.md)", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, apiError(u, resp.StatusCode, body)
	}
	return body, nil
}

// proxySource reads the API through the API server's service proxy, with
// the kubeconfig's identity (manifests/inspect/service-proxy.yaml).
type proxySource struct {
	kube               kubernetes.Interface
	namespace, service string
	port               int
}

func (s proxySource) get(ctx context.Context, path string) ([]byte, error) {
	p, rawQuery, _ := strings.Cut(path, "?")
	params := map[string]string{}
	if rawQuery != "" {
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return nil, err
		}
		for k := range q {
			params[k] = q.Get(k)
		}
	}
	body, err := s.kube.CoreV1().Services(s.namespace).ProxyGet("http", s.service, fmt.Sprint(s.port), iv1.PathPrefix+p, params).DoRaw(ctx)
	if err != nil {
		where := fmt.Sprintf("service %s/%s:%d", s.namespace, s.service, s.port)
		if len(body) > 0 {
			return nil, apiError(where, 0, body)
		}
		return nil, fmt.Errorf("reading the inspect API through the API server's proxy of %s: %w; apply manifests/inspect/service-proxy.yaml and set inspectBindAddress \":10262\", or use --inspect-url with a port-forward (docs/inspect.md)", where, err)
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
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return fmt.Errorf("%s: %s", where, e.Error)
	}
	return fmt.Errorf("%s: HTTP %d: %s", where, code, strings.TrimSpace(string(body)))
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
}

func (o *options) source() (source, error) {
	switch {
	case o.fromFile != "":
		return fileSource{o.fromFile}, nil
	case o.inspectURL != "":
		return urlSource{base: o.inspectURL, client: &http.Client{Timeout: o.timeout}}, nil
	}
	cfg, err := o.kube.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("no kubeconfig to reach the API server's service proxy (%w); or use --inspect-url", err)
	}
	cfg.Timeout = o.timeout
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return proxySource{kube: kube, namespace: o.namespace, service: o.service, port: o.port}, nil
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
