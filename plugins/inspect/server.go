// Package inspect serves the inspect API (apis/inspect/v1, docs/inspect.md):
// a read-only JSON view of the cell-state cache for operators and `kubectl
// hivesched`. Every answer is built from one copy taken under the core's
// lock (CellRecords, or one group's status), so a request never holds up
// scheduling longer than that copy, and nothing it does calls the API
// server but a pod lookup in the informer cache.
package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// Server answers the inspect API from the core and what the scheduler
// knows of groups, VCs and pods.
type Server struct {
	core      *cellcore.Core
	groups    Groups
	vcs       VirtualClusters
	pods      corelisters.PodLister
	ours      func(*v1.Pod) bool
	scheduler string
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

// Config is what a Server answers from.
type Config struct {
	Core            *cellcore.Core
	Groups          Groups
	VirtualClusters VirtualClusters
	// Pods looks pods up for `kubectl hivesched why`.
	Pods corelisters.PodLister
	// Ours reports whether this scheduler schedules a pod, whose profile
	// is Scheduler.
	Ours      func(*v1.Pod) bool
	Scheduler string
}

// New returns a server of the inspect API.
func New(cfg Config) *Server {
	return &Server{core: cfg.Core, groups: cfg.Groups, vcs: cfg.VirtualClusters, pods: cfg.Pods, ours: cfg.Ours, scheduler: cfg.Scheduler}
}

// Start listens on addr and serves the inspect API until ctx ends.
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
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
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
	logger.Info("serving the inspect API", "address", ln.Addr().String())
	return ln.Addr(), nil
}

// Handler routes the inspect API's GET endpoints.
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
		if vc != "" && len(s.virtualClusters(vc)) == 0 {
			replyError(w, http.StatusNotFound, fmt.Sprintf("virtual cluster %q is not known to the scheduler", vc))
			return
		}
		reply(w, http.StatusOK, s.cells(vc, node))
	})
	mux.HandleFunc("GET "+iv1.PathPrefix+"virtualclusters", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, s.virtualClusters(""))
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
		names := s.core.AffinityGroupNames()
		out := make([]iv1.AffinityGroup, 0, len(names))
		for _, n := range names {
			if g, _, ok := s.group(n, false); ok {
				out = append(out, g)
			}
		}
		reply(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET "+iv1.PathPrefix+"affinitygroups/{ns}/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("ns") + "/" + r.PathValue("name")
		g, _, ok := s.group(name, true)
		if !ok {
			replyError(w, http.StatusNotFound, fmt.Sprintf("affinity group %s is not known to the scheduler (it has no pod waiting or running)", name))
			return
		}
		reply(w, http.StatusOK, g)
	})
	mux.HandleFunc("GET "+iv1.PathPrefix+"pods/{ns}/{name}", func(w http.ResponseWriter, r *http.Request) {
		e, code, err := s.explainPod(r.PathValue("ns"), r.PathValue("name"))
		if err != nil {
			replyError(w, code, err.Error())
			return
		}
		reply(w, http.StatusOK, e)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		replyError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint %s %s: the inspect API serves GET %s{cells,virtualclusters,affinitygroups,pods/NS/NAME}", r.Method, r.URL.Path, iv1.PathPrefix))
	})
	return mux
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func replyError(w http.ResponseWriter, code int, msg string) {
	reply(w, code, iv1.Error{Error: msg})
}
