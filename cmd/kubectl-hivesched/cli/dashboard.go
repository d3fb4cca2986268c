package cli

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
)

func dashboardCommand(o *options) *cobra.Command {
	var address string
	var port int
	var open bool
	cmd := &cobra.Command{
		Use:   "dashboard [--port 10264] [--open]",
		Short: "Serve the scheduler's dashboard on this machine (127.0.0.1), with your kubeconfig's credentials",
		Long: `kubectl hivesched dashboard serves the scheduler's read-only dashboard on
this machine's loopback address: every request of the page goes to the
scheduler the way the other commands go (the API server's service proxy, or
--inspect-url), with your kubeconfig's credentials, so the page shows what
you may see. It prints a URL with a one-time token: only a browser that
opened it gets the page (other users of this machine do not). Ctrl-C stops it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.fromFile != "" {
				return errors.New("the dashboard reads the scheduler live: --from-file does not apply")
			}
			if !loopback(address) {
				return fmt.Errorf("--address %q: the dashboard forwards your credentials, so it listens on a loopback address only (127.0.0.1, ::1, localhost)", address)
			}
			up, err := o.upstream(0)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			// Say now, not in the browser, when the scheduler cannot be read.
			check, cancel := context.WithTimeout(ctx, o.timeout)
			_, err = up.get(check, "virtualclusters")
			cancel()
			if err != nil {
				return err
			}
			ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort(address, strconv.Itoa(port)))
			if err != nil {
				return fmt.Errorf("listening on %s:%d: %w (choose another --port, or 0 for any)", address, port, err)
			}
			secret, err := newSecret()
			if err != nil {
				return err
			}
			p := &dashboardProxy{up: up, secret: secret, port: ln.Addr().(*net.TCPAddr).Port, timeout: o.timeout}
			srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 90 * time.Second, MaxHeaderBytes: 64 << 10}
			link := fmt.Sprintf("http://%s/?token=%s", ln.Addr().String(), secret)
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Serving the hivesched dashboard of %s on %s (Ctrl-C to stop).\nOpen %s\n", up.where, ln.Addr(), link)
			if open {
				if err := openBrowser(link); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "could not open a browser (%v): open the URL above\n", err)
				}
			}
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx)
			}()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&address, "address", "127.0.0.1", "loopback address to listen on")
	cmd.Flags().IntVar(&port, "port", 10264, "port to listen on (0: any free port)")
	cmd.Flags().BoolVar(&open, "open", false, "open the page in the default browser")
	return cmd
}

func newSecret() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// cookieName carries the one-time token once the page is opened.
const cookieName = "hivesched-dashboard"

// dashboardProxy serves the page and its API calls from the scheduler, to
// a browser on this machine that opened the printed URL.
type dashboardProxy struct {
	up      upstream
	secret  string
	port    int
	timeout time.Duration
}

func (p *dashboardProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	// Another site's page resolving its name to 127.0.0.1 (DNS rebinding)
	// sends its own Host: refused.
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil || !loopback(strings.Trim(host, "[]")) || port != strconv.Itoa(p.port) {
		http.Error(w, "this server answers requests to its loopback address only", http.StatusForbidden)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "read-only: GET only", http.StatusMethodNotAllowed)
		return
	}
	if t := r.URL.Query().Get("token"); t != "" {
		if !p.valid(t) {
			http.Error(w, "wrong token: open the URL kubectl hivesched dashboard printed", http.StatusUnauthorized)
			return
		}
		http.SetCookie(w, &http.Cookie{Name: cookieName, Value: p.secret, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, iv1.DashboardPath, http.StatusSeeOther)
		return
	}
	c, err := r.Cookie(cookieName)
	if err != nil || !p.valid(c.Value) {
		http.Error(w, "open the URL kubectl hivesched dashboard printed (it carries a one-time token)", http.StatusUnauthorized)
		return
	}
	switch {
	case r.URL.Path == "/":
		http.Redirect(w, r, iv1.DashboardPath, http.StatusFound)
		return
	case strings.HasPrefix(r.URL.Path, iv1.DashboardPath), strings.HasPrefix(r.URL.Path, iv1.PathPrefix):
	default:
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), max(p.timeout, 10*time.Second))
	defer cancel()
	fwd := http.Header{}
	for _, k := range []string{"Accept", "If-None-Match"} {
		if v := r.Header.Get(k); v != "" {
			fwd.Set(k, v)
		}
	}
	resp, err := p.up.do(ctx, r.Method, r.URL.RequestURI(), fwd)
	if err != nil {
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = fmt.Fprintf(w, "{\"error\":%q}\n", err.Error())
		return
	}
	defer func() { _ = resp.Body.Close() }()
	for _, k := range []string{"Content-Type", "ETag", "Cache-Control", "Content-Security-Policy", "Retry-After", "Location"} {
		if v := resp.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (p *dashboardProxy) valid(token string) bool {
	return subtle.ConstantTimeCompare([]byte(token), []byte(p.secret)) == 1
}

func openBrowser(url string) error {
	switch runtime.GOOS {
	case "darwin":
		return exec.Command("open", url).Start()
	case "windows":
		return exec.Command("rundll32", "url.dll,FileProtocolHandler", url).Start()
	}
	return exec.Command("xdg-open", url).Start()
}
