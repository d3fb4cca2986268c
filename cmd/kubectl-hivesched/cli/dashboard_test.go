package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
)

// fakeScheduler is an inspect server that records what it was asked.
type fakeScheduler struct {
	mu   sync.Mutex
	seen []*http.Request
}

func (f *fakeScheduler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen = append(f.seen, r.Clone(context.Background()))
	f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer s3cret" && r.Header.Get(iv1.AuthorizationHeader) != "Bearer s3cret" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"authentication required"}`)
		return
	}
	switch {
	case r.URL.Path == iv1.PathPrefix+"cellmap" && r.Header.Get("If-None-Match") == `"v1"`:
		w.Header().Set("ETag", `"v1"`)
		w.WriteHeader(http.StatusNotModified)
	case strings.HasPrefix(r.URL.Path, iv1.PathPrefix):
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", `"v1"`)
		_, _ = io.WriteString(w, `[]`)
	case r.URL.Path == iv1.DashboardPath:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'")
		_, _ = io.WriteString(w, "<!DOCTYPE html><title>hivesched dashboard</title>")
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeScheduler) last() *http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[len(f.seen)-1]
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDashboardCommand: `kubectl hivesched dashboard` listens on loopback
// only, gives the page to a browser that opened its one-time URL (a
// cookie), to nobody else, answers requests to its own address only (DNS
// rebinding), forwards GETs of the page and the API with the caller's
// token, and nothing else.
func TestDashboardCommand(t *testing.T) {
	sched := &fakeScheduler{}
	up := httptest.NewServer(sched)
	defer up.Close()

	var errOut bytes.Buffer
	cmd := NewCommand(io.Discard, &errOut)
	cmd.SetArgs([]string{"dashboard", "--address", "0.0.0.0", "--inspect-url", up.URL, "--token", "s3cret"})
	require.ErrorContains(t, cmd.ExecuteContext(t.Context()), "loopback address only")

	cmd = NewCommand(io.Discard, &errOut)
	cmd.SetArgs([]string{"dashboard", "--port", "0", "--inspect-url", up.URL, "--token", "wrong"})
	require.ErrorContains(t, cmd.ExecuteContext(t.Context()), "authentication required", "said at once, not in the browser")

	ctx, cancel := context.WithCancel(t.Context())
	var out lockedBuffer
	cmd = NewCommand(&out, &errOut)
	cmd.SetArgs([]string{"dashboard", "--port", "0", "--inspect-url", up.URL, "--token", "s3cret"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	var link string
	re := regexp.MustCompile(`Open (http://(127\.0\.0\.1:\d+)/\?token=([0-9a-f]+))`)
	require.Eventually(t, func() bool {
		m := re.FindStringSubmatch(out.String())
		if m != nil {
			link = m[1]
		}
		return m != nil
	}, 10*time.Second, 20*time.Millisecond)
	m := re.FindStringSubmatch(out.String())
	hostPort, token := m[2], m[3]

	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(url string, mod func(*http.Request)) *http.Response {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		if mod != nil {
			mod(req)
		}
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	base := "http://" + hostPort

	// Without the token: nothing.
	require.Equal(t, http.StatusUnauthorized, get(base+iv1.DashboardPath, nil).StatusCode)
	require.Equal(t, http.StatusUnauthorized, get(base+"/?token=nope", nil).StatusCode)
	// The one-time URL: a cookie, and the token out of the address bar.
	resp := get(link, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, iv1.DashboardPath, resp.Header.Get("Location"))
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == cookieName {
			cookie = c
		}
	}
	require.NotNil(t, cookie)
	require.True(t, cookie.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, cookie.SameSite)
	require.Equal(t, token, cookie.Value)
	withCookie := func(r *http.Request) { r.AddCookie(cookie) }

	// The page, from the scheduler, with its headers, with the token.
	resp = get(base+iv1.DashboardPath, withCookie)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "default-src 'none'", resp.Header.Get("Content-Security-Policy"))
	body, _ := io.ReadAll(resp.Body)
	require.Contains(t, string(body), "hivesched dashboard")
	require.Equal(t, "Bearer s3cret", sched.last().Header.Get("Authorization"))
	// An API call, conditional: the scheduler's 304 comes back.
	resp = get(base+iv1.PathPrefix+"cellmap", func(r *http.Request) { withCookie(r); r.Header.Set("If-None-Match", `"v1"`) })
	require.Equal(t, http.StatusNotModified, resp.StatusCode)
	// Another site's name for this address: refused (DNS rebinding).
	resp = get(base+iv1.DashboardPath, func(r *http.Request) { withCookie(r); r.Host = "evil.example:" + strings.Split(hostPort, ":")[1] })
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	// Nothing but the page and the API; nothing but GET.
	require.Equal(t, http.StatusNotFound, get(base+"/api/v1/secrets", withCookie).StatusCode)
	req, err := http.NewRequest(http.MethodPost, base+iv1.PathPrefix+"cells", nil)
	require.NoError(t, err)
	req.AddCookie(cookie)
	resp, err = noRedirect.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// Through the API server's service proxy, the token goes on in the header
// the inspect API reads (the API server keeps Authorization for itself).
func TestTokenCopier(t *testing.T) {
	var got http.Header
	rt := tokenCopier{next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header.Clone()
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})}
	req, _ := http.NewRequest(http.MethodGet, "https://api.example/api/v1/namespaces/hivesched-system/services/http:hivesched-inspect:10262/proxy/v1/inspect/cells", nil)
	req.Header.Set("Authorization", "Bearer abc")
	_, err := rt.RoundTrip(req)
	require.NoError(t, err)
	require.Equal(t, "Bearer abc", got.Get("Authorization"))
	require.Equal(t, "Bearer abc", got.Get(iv1.AuthorizationHeader))
	require.Empty(t, req.Header.Get(iv1.AuthorizationHeader), "the caller's request is not changed")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
