// Package inspect serves the inspect API (apis/inspect/v1, docs/inspect.md):
// a read-only JSON view of the cell-state cache for operators, `kubectl
// hivesched` and the dashboard (plugins/inspect/dashboard), which it serves
// beside it. Every answer is built from one copy taken under the core's
// lock (CellRecords, or one group's status), so a request never holds up
// scheduling longer than that copy, and nothing it does calls the API
// server but a pod lookup in the informer cache and the reviews of who
// asks (access.go), which the API server's clients cache.
package inspect

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
	"github.com/hivesched/hivesched/plugins/affinitygroups"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/inspect/dashboard"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// Server answers the inspect API from the core and what the scheduler
// knows of groups, VCs and pods.
type Server struct {
	core       *cellcore.Core
	groups     Groups
	vcs        VirtualClusters
	lifecycles Lifecycles
	pods       corelisters.PodLister
	ours       func(*v1.Pod) bool
	scheduler  string
	access     Access
	events     *EventLog
	ready      func() error
	history    *history
	cache      *ttlCache
	inFlight   chan struct{}
	queueWait  time.Duration
	dashboard  http.Handler
}

// Groups are the member pods of the groups and the pods' requests (the
// group index).
type Groups interface {
	Pods(group string) []*v1.Pod
	MemberCount(group string) int
	Request(pod *v1.Pod) (*podrequest.Request, error)
}

// VirtualClusters are the VCs the scheduler knows.
type VirtualClusters interface {
	// States are the VCs' lifecycle states (only name's if set).
	States(name string) map[string]string
	// Admits says why a namespace may not start a new group in a VC, or "".
	Admits(vc, namespace string) string
}

// Lifecycles are the groups' lifecycles (the AffinityGroup tracker).
type Lifecycles interface {
	Lifecycles() map[string]affinitygroups.Lifecycle
}

// Config is what a Server answers from.
type Config struct {
	Core            *cellcore.Core
	Groups          Groups
	VirtualClusters VirtualClusters
	// Lifecycles: phases and the sentence of why each group waits (nil:
	// none).
	Lifecycles Lifecycles
	// Pods looks pods up for `kubectl hivesched why`.
	Pods corelisters.PodLister
	// Ours reports whether this scheduler schedules a pod, whose profile
	// is Scheduler.
	Ours      func(*v1.Pod) bool
	Scheduler string
	// Access authenticates and authorizes every request (DelegatedAccess);
	// without an authenticator the server answers nobody.
	Access Access
	// Events is the log of recent preemptions and downgrades the
	// scheduler notes (nil: a log nobody writes).
	Events *EventLog
	// Ready, if set, is served at ReadyPath without authentication: 200
	// when nil, 503 otherwise (the reason is in the scheduler's log and
	// metrics, not told to an anonymous caller).
	Ready func() error
}

// ReadyPath is where the server answers whether the scheduler's own writes
// go through (plugins/selfcheck): a readiness probe's target.
const ReadyPath = "/readyz"

// Limits of the server: requests served at once (one waits up to
// QueueWait for its turn, then is told to retry), and the times of a
// connection.
const (
	MaxInFlight       = 8
	QueueWait         = 2 * time.Second
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 30 * time.Second
	WriteTimeout      = 2 * time.Minute // the whole tree of 10k nodes is 31 MB
	IdleTimeout       = 90 * time.Second
	MaxHeaderBytes    = 64 << 10
	// TreeCacheTTL is how long an answer built from the whole tree (the
	// tree, the cell map, the VC list, the groups) is served again: every
	// viewer polling at once costs one copy of the cells per TreeCacheTTL.
	TreeCacheTTL = time.Second
)

// New returns a server of the inspect API.
func New(cfg Config) *Server {
	events := cfg.Events
	if events == nil {
		events = NewEventLog()
	}
	return &Server{core: cfg.Core, groups: cfg.Groups, vcs: cfg.VirtualClusters, lifecycles: cfg.Lifecycles, pods: cfg.Pods, ours: cfg.Ours,
		scheduler: cfg.Scheduler, access: cfg.Access, events: events, history: newHistory(HistorySamples), cache: newTTLCache(), ready: cfg.Ready,
		inFlight: make(chan struct{}, MaxInFlight), queueWait: QueueWait, dashboard: dashboard.Handler()}
}

// Start listens on addr and serves the inspect API and the dashboard until
// ctx ends, and samples the VCs' counts for their history meanwhile.
// A listen error fails the plugin's start: an operator who configured the
// address wants to know it is not served.
func (s *Server) Start(ctx context.Context, addr string) (net.Addr, error) {
	// The address may still be held for a moment by an instance of this
	// process that is shutting down (a profile rebuilt, a test or benchmark
	// starting its next scheduler): retry briefly before giving up.
	var ln net.Listener
	var err error
	for try := 0; ; try++ {
		ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || try == 50 || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("inspect API: %w (set inspectBindAddress to another address, or \"\" to disable it)", err)
	}
	srv := s.httpServer(ctx)
	logger := klog.FromContext(ctx)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "inspect API stopped", "address", ln.Addr().String())
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go s.sample(ctx, HistoryInterval)
	logger.Info("serving the inspect API and the dashboard", "address", ln.Addr().String(), "dashboard", iv1.DashboardPath)
	return ln.Addr(), nil
}

// httpServer is the server of Start: its timeouts end slow or idle
// connections (a client that never reads its answer holds a turn for
// WriteTimeout at most).
func (s *Server) httpServer(ctx context.Context) *http.Server {
	return &http.Server{Handler: s.Handler(), ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout,
		WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout, MaxHeaderBytes: MaxHeaderBytes,
		BaseContext: func(net.Listener) context.Context { return ctx }}
}

// sample adds the VCs' counts to their history every interval until ctx
// ends.
func (s *Server) sample(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.history.add(time.Now().UTC(), s.leafCounts())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

type viewerKey struct{}

func viewerOf(r *http.Request) *viewer {
	v, _ := r.Context().Value(viewerKey{}).(*viewer)
	return v
}

// guard is every request's way in: GET only, at most MaxInFlight at once,
// authenticated and authorized (access.go), with the headers a read-only
// JSON API and its page want.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			replyError(w, http.StatusMethodNotAllowed, "the inspect API is read-only: GET only")
			return
		}
		if r.URL.Path == ReadyPath && s.ready != nil {
			// One bit, for probes: no authentication, no turn taken.
			if s.ready() != nil {
				replyError(w, http.StatusServiceUnavailable, "not ready: the scheduler's own writes are refused by admission (see its log and hivesched_own_writes_refused_total)")
				return
			}
			h.Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte("ok\n"))
			return
		}
		if r.Header.Get("Authorization") == "" && r.Header.Get(iv1.AuthorizationHeader) == "" {
			// Nothing to review: refused without taking a turn.
			h.Set("WWW-Authenticate", `Bearer realm="hivesched-inspect"`)
			replyError(w, http.StatusUnauthorized, "authentication required: send a bearer token (Authorization, or "+iv1.AuthorizationHeader+
				" through the API server's proxy); kubectl hivesched sends your kubeconfig's")
			return
		}
		timer := time.NewTimer(s.queueWait)
		select {
		case s.inFlight <- struct{}{}:
			timer.Stop()
		case <-timer.C:
			h.Set("Retry-After", "1")
			replyError(w, http.StatusServiceUnavailable, fmt.Sprintf("the inspect API is busy (%d requests being served): retry", MaxInFlight))
			return
		case <-r.Context().Done():
			timer.Stop()
			return
		}
		defer func() { <-s.inFlight }()
		v, code, msg := s.access.admit(r)
		if v == nil {
			if code == http.StatusUnauthorized {
				h.Set("WWW-Authenticate", `Bearer realm="hivesched-inspect"`)
			}
			replyError(w, code, msg)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), viewerKey{}, v)))
	})
}

// Handler routes the inspect API's GET endpoints and the dashboard, behind
// guard.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+iv1.PathPrefix+"cells", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		vc, node := q.Get("vc"), q.Get("node")
		if node != "" {
			if _, known := s.core.NodeHealthOf(node); !known {
				replyError(w, http.StatusNotFound, fmt.Sprintf("node %q is not in the physical cluster (the HiveSched args' physicalCluster)", node))
				return
			}
		}
		if vc != "" && len(s.vcs.States(vc)) == 0 {
			replyError(w, http.StatusNotFound, fmt.Sprintf("virtual cluster %q is not known to the scheduler", vc))
			return
		}
		var cells iv1.ClusterCells
		if node != "" {
			cells = s.cells(vc, node) // tens of microseconds: not cached
		} else {
			cells = s.cache.get("cells?vc="+vc, TreeCacheTTL, func() any { return s.cells(vc, "") }).(iv1.ClusterCells)
		}
		reply(w, http.StatusOK, redactCells(cells, viewerOf(r)))
	})
	mux.HandleFunc("GET "+iv1.PathPrefix+"cellmap", func(w http.ResponseWriter, r *http.Request) {
		s.cache.get("cellmap", TreeCacheTTL, func() any { return encodeCellMap(s.cellMap()) }).(*encoded).serve(w, r)
	})
	mux.HandleFunc("GET "+iv1.PathPrefix+"virtualclusters", func(w http.ResponseWriter, r *http.Request) {
		s.cache.get("virtualclusters", TreeCacheTTL, func() any { return encodeJSON(s.virtualClusters("")) }).(*encoded).serve(w, r)
	})
	mux.HandleFunc("GET "+iv1.PathPrefix+"virtualclusters/{name}", func(w http.ResponseWriter, r *http.Request) {
		vcs := s.virtualClusters(r.PathValue("name"))
		if len(vcs) == 0 {
			replyError(w, http.StatusNotFound, fmt.Sprintf("virtual cluster %q is not known to the scheduler", r.PathValue("name")))
			return
		}
		reply(w, http.StatusOK, vcs[0])
	})
	mux.HandleFunc("GET "+iv1.PathPrefix+"affinitygroups", func(w http.ResponseWriter, r *http.Request) {
		all := r.URL.Query().Get("all") == "true"
		key := "affinitygroups"
		if all {
			key += "?all=true"
		}
		type answer struct {
			groups []iv1.AffinityGroup
			json   *encoded
		}
		a := s.cache.get(key, TreeCacheTTL, func() any {
			g := s.groupList(all)
			return answer{groups: g, json: encodeJSON(g)}
		}).(answer)
		if v := viewerOf(r); !v.all {
			reply(w, http.StatusOK, s.visibleGroups(a.groups, v))
			return
		}
		a.json.serve(w, r)
	})
	mux.HandleFunc("GET "+iv1.PathPrefix+"affinitygroups/{ns}/{name}", func(w http.ResponseWriter, r *http.Request) {
		v := viewerOf(r)
		name := r.PathValue("ns") + "/" + r.PathValue("name")
		if !v.sees(r.PathValue("ns")) {
			replyError(w, http.StatusForbidden, forbiddenNamespace(v, r.PathValue("ns")))
			return
		}
		g, _, ok := s.group(name, true)
		if !ok {
			replyError(w, http.StatusNotFound, fmt.Sprintf("affinity group %s is not known to the scheduler (it has no pod waiting or running)", name))
			return
		}
		s.addLifecycle(&g, s.lifecycleMap()[name])
		reply(w, http.StatusOK, s.redactGroup(g, v, s.knownGroups(v)))
	})
	mux.HandleFunc("GET "+iv1.PathPrefix+"pods/{ns}/{name}", func(w http.ResponseWriter, r *http.Request) {
		v := viewerOf(r)
		if !v.sees(r.PathValue("ns")) {
			replyError(w, http.StatusForbidden, forbiddenNamespace(v, r.PathValue("ns")))
			return
		}
		e, code, err := s.explainPod(r.PathValue("ns"), r.PathValue("name"))
		if err != nil {
			replyError(w, code, err.Error())
			return
		}
		reply(w, http.StatusOK, s.redactExplanation(e, v))
	})
	mux.HandleFunc("GET "+iv1.PathPrefix+"history", func(w http.ResponseWriter, r *http.Request) {
		h := s.history.snapshot(HistoryInterval)
		// The charts end now, not at the last sample.
		now := s.cache.get("leafcounts", TreeCacheTTL, func() any { return s.leafCounts() }).(map[string]iv1.LeafCounts)
		h.Times = append(h.Times, time.Now().UTC())
		for name, ring := range h.VirtualClusters {
			h.VirtualClusters[name] = append(ring, now[name])
		}
		for name, c := range now {
			if _, ok := h.VirtualClusters[name]; !ok {
				h.VirtualClusters[name] = append(make([]iv1.LeafCounts, len(h.Times)-1), c)
			}
		}
		reply(w, http.StatusOK, h)
	})
	mux.HandleFunc("GET "+iv1.PathPrefix+"events", func(w http.ResponseWriter, r *http.Request) {
		v := viewerOf(r)
		logged := s.events.list(func(ns string) bool { return ns == "" || v.sees(ns) })
		out := make([]iv1.Event, 0, len(logged))
		var known func(string) bool
		for _, e := range logged {
			if !v.all {
				if known == nil {
					known = s.knownGroups(v)
				}
				e.Message = v.redact(e.Message, known)
			}
			out = append(out, e.Event)
		}
		reply(w, http.StatusOK, out)
	})
	mux.Handle("GET "+iv1.DashboardPath, http.StripPrefix(strings.TrimSuffix(iv1.DashboardPath, "/"), s.dashboard))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		// Relative (http.Redirect would make it absolute): behind the API
		// server's service proxy the path has a prefix.
		w.Header().Set("Location", strings.TrimPrefix(iv1.DashboardPath, "/"))
		w.WriteHeader(http.StatusFound)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		replyError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint %s %s: the inspect API serves GET %s{cells,cellmap,virtualclusters,affinitygroups,pods/NS/NAME,history,events}, the dashboard %s",
			r.Method, r.URL.Path, iv1.PathPrefix, iv1.DashboardPath))
	})
	return s.guard(mux)
}

func forbiddenNamespace(v *viewer, ns string) string {
	return fmt.Sprintf("%s may not list pods in namespace %q, nor %s.%s everywhere: the inspect API does not show it that namespace's groups and pods",
		v.user.GetName(), ns, iv1.AuthorizationResource, iv1.AuthorizationGroup)
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func replyError(w http.ResponseWriter, code int, msg string) {
	reply(w, code, iv1.Error{Error: msg})
}

// encoded is an answer encoded once and served to every viewer who may see
// all of it, with an ETag of its content (but the time of the cell map), so
// that a page polling it downloads and redraws it only when it changed.
type encoded struct {
	body []byte
	etag string
}

func encodeJSON(v any) *encoded {
	body, err := json.Marshal(v)
	if err != nil {
		return &encoded{body: []byte(`{"error":"encoding the answer failed"}`)}
	}
	sum := sha256.Sum256(body)
	return &encoded{body: append(body, '\n'), etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

func encodeCellMap(m iv1.CellMap) *encoded {
	at := m.GeneratedAt
	m.GeneratedAt = time.Time{}
	body, err := json.Marshal(&m)
	if err != nil {
		return &encoded{body: []byte(`{"error":"encoding the cell map failed"}`)}
	}
	sum := sha256.Sum256(body)
	zero, _ := json.Marshal(time.Time{})
	now, _ := json.Marshal(at)
	body = bytes.Replace(body, zero, now, 1) // generatedAt is the first field
	return &encoded{body: append(body, '\n'), etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

func (e *encoded) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("ETag", e.etag)
	w.Header().Set("Cache-Control", "no-cache")
	if r.Header.Get("If-None-Match") == e.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(e.body)
}
