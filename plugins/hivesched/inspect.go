package hivesched

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// The inspect API (apis/inspect/v1, docs/inspect.md): a read-only JSON view
// of the cell-state cache for operators and `kubectl hivesched`. Every answer
// is built from one copy taken under the core's lock (CellRecords, or one
// group's status), so a request never holds up scheduling longer than that
// copy, and nothing it does calls the API server but a pod lookup in the
// informer cache.

// startInspect listens on addr and serves the inspect API until ctx ends.
// A listen error fails the plugin's start: an operator who configured the
// address wants to know it is not served.
func (p *HiveSched) startInspect(ctx context.Context, addr string) (net.Addr, error) {
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
	srv := &http.Server{Handler: p.inspectHandler(), ReadHeaderTimeout: 10 * time.Second}
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

// inspectHandler routes the inspect API's GET endpoints.
func (p *HiveSched) inspectHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+iv1.PathPrefix+"cells", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		vc, node := q.Get("vc"), q.Get("node")
		if node != "" {
			if _, known := p.core.NodeHealthOf(node); !known {
				replyError(w, http.StatusNotFound, fmt.Sprintf("node %q is not in the physical cluster (the HiveSched args' physicalCluster)", node))
				return
			}
		}
		if vc != "" && len(p.inspectVCs(vc)) == 0 {
			replyError(w, http.StatusNotFound, fmt.Sprintf("virtual cluster %q is not known to the scheduler", vc))
			return
		}
		reply(w, http.StatusOK, p.inspectCells(vc, node))
	})
	mux.HandleFunc("GET "+iv1.PathPrefix+"virtualclusters", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, p.inspectVCs(""))
	})
	mux.HandleFunc("GET "+iv1.PathPrefix+"virtualclusters/{name}", func(w http.ResponseWriter, r *http.Request) {
		vcs := p.inspectVCs(r.PathValue("name"))
		if len(vcs) == 0 {
			replyError(w, http.StatusNotFound, fmt.Sprintf("virtual cluster %q is not known to the scheduler", r.PathValue("name")))
			return
		}
		reply(w, http.StatusOK, vcs[0])
	})
	mux.HandleFunc("GET "+iv1.PathPrefix+"affinitygroups", func(w http.ResponseWriter, r *http.Request) {
		names := p.core.AffinityGroupNames()
		out := make([]iv1.AffinityGroup, 0, len(names))
		for _, n := range names {
			if g, _, ok := p.inspectGroup(n, false); ok {
				out = append(out, g)
			}
		}
		reply(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET "+iv1.PathPrefix+"affinitygroups/{ns}/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("ns") + "/" + r.PathValue("name")
		g, _, ok := p.inspectGroup(name, true)
		if !ok {
			replyError(w, http.StatusNotFound, fmt.Sprintf("affinity group %s is not known to the scheduler (it has no pod waiting or running)", name))
			return
		}
		reply(w, http.StatusOK, g)
	})
	mux.HandleFunc("GET "+iv1.PathPrefix+"pods/{ns}/{name}", func(w http.ResponseWriter, r *http.Request) {
		e, code, err := p.explainPod(r.PathValue("ns"), r.PathValue("name"))
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

// cellIDs names each record by its path (chain/address/.../address, as
// cellcore's Cell.ID), computed from the parent's.
func cellIDs(recs []cellcore.CellRecord) []string {
	ids := make([]string, len(recs))
	for i, r := range recs {
		if r.Parent < 0 {
			ids[i] = r.Chain() + "/" + r.Address()
		} else {
			ids[i] = ids[r.Parent] + "/" + r.Address()
		}
	}
	return ids
}

// recordBufs keeps the records' memory from one answer to the next: a
// fresh buffer for the whole cluster is megabytes of zeroed pages, the
// larger part of the time the copy holds the core's lock.
var recordBufs = sync.Pool{New: func() any { return new([]cellcore.CellRecord) }}

// inspectCells builds the physical tree from one CellRecords copy, outside
// the core's lock. vc keeps the cells bound to it; node keeps that node's
// cells; both keep the ancestors of what they keep.
func (p *HiveSched) inspectCells(vc, node string) iv1.ClusterCells {
	buf := recordBufs.Get().(*[]cellcore.CellRecord)
	recs := p.core.CellRecords(*buf, vc, node)
	defer func() {
		clear(recs) // drop the references to group names and cells
		*buf = recs[:0]
		recordBufs.Put(buf)
	}()
	ids := cellIDs(recs)
	keep := make([]bool, len(recs))
	for i, r := range recs {
		if (vc == "" || r.VirtualCluster == vc) && (node == "" || r.Node() == node) {
			for j := int32(i); j >= 0 && !keep[j]; j = recs[j].Parent {
				keep[j] = true
			}
		}
	}
	// Records are depth first, each after its parent: going backwards, a
	// cell's subtree is complete when it is reached, and it is then added
	// to its parent (children end up reversed, and are put back in order).
	cells := make([]iv1.Cell, len(recs))
	out := iv1.ClusterCells{GeneratedAt: time.Now().UTC(), Chains: []iv1.Chain{}, Filter: iv1.Filter{VirtualCluster: vc, Node: node}}
	chains := map[string]int{}
	var tops []int
	for i := len(recs) - 1; i >= 0; i-- {
		if !keep[i] {
			continue
		}
		r := &recs[i]
		c := &cells[i]
		c.ID, c.CellType, c.Level, c.Address, c.Node, c.Health = ids[i], r.CellType(), r.Level(), r.Address(), r.Node(), r.Health
		c.VirtualCluster, c.PinnedCellID = r.VirtualCluster, r.PinnedCellID
		c.Leaves, c.UsedLeaves, c.FreeLeaves, c.BadLeaves = r.Leaves, r.Used, r.Free, r.Bad
		if r.Level() == 1 {
			idx := r.Index()
			c.Index = &idx
			c.State = r.State.String()
			c.Group, c.ReservingGroup = r.Group, r.Reserving
			if r.Group != "" {
				prio := r.Priority
				c.Priority = &prio
			}
		}
		for a, b := 0, len(c.Children)-1; a < b; a, b = a+1, b-1 {
			c.Children[a], c.Children[b] = c.Children[b], c.Children[a]
		}
		if r.Parent >= 0 {
			cells[r.Parent].Children = append(cells[r.Parent].Children, *c)
		} else {
			tops = append(tops, i)
		}
	}
	for k := len(tops) - 1; k >= 0; k-- {
		i := tops[k]
		r := &recs[i]
		ci, ok := chains[r.Chain()]
		if !ok {
			ci = len(out.Chains)
			chains[r.Chain()] = ci
			out.Chains = append(out.Chains, iv1.Chain{Name: r.Chain(), LeafCellType: r.LeafType(), Levels: p.chainLevels(recs, i)})
		}
		out.Chains[ci].Cells = append(out.Chains[ci].Cells, cells[i])
	}
	return out
}

// chainLevels names the cell type of each level of the chain whose top cell
// is recs[top], leaf first, from the records below it.
func (p *HiveSched) chainLevels(recs []cellcore.CellRecord, top int) []string {
	levels := make([]string, recs[top].Level())
	for i := top; i < len(recs) && (i == top || recs[i].Parent >= 0); i++ {
		if l := recs[i].Level(); l >= 1 && l <= len(levels) && levels[l-1] == "" {
			levels[l-1] = recs[i].CellType()
		}
		if recs[i].Level() == 1 {
			break // the first leaf: every level above it was on the way down
		}
	}
	return levels
}

// inspectVCs describes the VCs the scheduler knows (one if name is set).
func (p *HiveSched) inspectVCs(name string) []iv1.VirtualCluster {
	infos := p.vcs.States(name)
	if len(infos) == 0 {
		return nil
	}
	// Physical cells bound to each VC (as wholes): a copy of each VC's
	// cells.
	type levelKey struct {
		vc, chain string
		level     int
	}
	bound := map[levelKey][]string{}
	pinnedAt := map[string]string{}
	var recs []cellcore.CellRecord
	for n := range infos {
		recs = p.core.CellRecords(recs, n, "")
		ids := cellIDs(recs)
		for i := range recs {
			r := &recs[i]
			if !r.BindingRoot {
				continue
			}
			if r.PinnedCellID != "" {
				pinnedAt[r.PinnedCellID] = ids[i]
				continue
			}
			k := levelKey{r.VirtualCluster, r.Chain(), r.Level()}
			bound[k] = append(bound[k], ids[i])
		}
	}
	names := make([]string, 0, len(infos))
	for n := range infos {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]iv1.VirtualCluster, 0, len(names))
	for _, n := range names {
		v := iv1.VirtualCluster{Name: n, State: infos[n], Cells: []iv1.VirtualCells{}, AffinityGroups: map[string]int{}}
		if st, ok := p.core.VirtualClusterStatus(n); ok {
			for _, c := range st.Cells {
				v.Cells = append(v.Cells, iv1.VirtualCells{Chain: c.Chain, CellType: c.CellType, Level: c.Level, Total: c.Total, Bound: c.Bound,
					Physical: bound[levelKey{n, c.Chain, c.Level}]})
				v.LeafCells.Total += c.LeafCells
				v.LeafCells.Used += c.UsedLeafCells
				v.LeafCells.Free += c.FreeLeafCells
			}
			for _, c := range st.PinnedCells {
				v.PinnedCells = append(v.PinnedCells, iv1.PinnedCell{ID: c.PinnedCellID, CellType: c.CellType, Physical: pinnedAt[c.PinnedCellID]})
				v.LeafCells.Total += c.LeafCells
				v.LeafCells.Used += c.UsedLeafCells
				v.LeafCells.Free += c.FreeLeafCells
			}
			v.LeafCells.Opportunistic = st.OpportunisticLeafCells
			for s, k := range st.AffinityGroups {
				v.AffinityGroups[s.String()] = k
			}
		}
		out = append(out, v)
	}
	return out
}

// inspectGroup describes one group; full adds who holds its VC's cells
// (the list endpoint leaves it out: it walks the VC's cells).
func (p *HiveSched) inspectGroup(name string, full bool) (iv1.AffinityGroup, []cellcore.GroupHolder, bool) {
	var (
		st      cellcore.AffinityGroupStatus
		reason  string
		victims []string
		holders []cellcore.GroupHolder
	)
	if full {
		e, ok := p.core.ExplainAffinityGroup(name)
		if !ok {
			return iv1.AffinityGroup{}, nil, false
		}
		st, reason, victims, holders = e.AffinityGroupStatus, e.Reason, e.Victims, e.Holders
	} else {
		var ok bool
		if st, ok = p.core.AffinityGroupStatus(name); !ok {
			return iv1.AffinityGroup{}, nil, false
		}
	}
	g := iv1.AffinityGroup{Name: name, VirtualCluster: st.VirtualCluster, State: st.State.String(), Priority: st.Priority,
		Downgraded: st.Downgraded, Reason: reason, Victims: victims}
	names := map[string]string{}
	for _, pod := range p.groups.Pods(name) {
		names[podrequest.PodKey(pod)] = pod.Namespace + "/" + pod.Name
	}
	for _, pp := range st.Pods {
		g.Pods = append(g.Pods, iv1.Pod{Name: names[pp.PodKey], Node: pp.Node, LeafCellType: pp.LeafCellType,
			LeafCellNumber: pp.LeafCellNumber, LeafCellIndices: pp.LeafCellIndices})
	}
	return g, holders, true
}

// explainPod answers `kubectl hivesched why`: the pod's group, what it
// waits for, and who holds the cells it could use.
func (p *HiveSched) explainPod(ns, name string) (iv1.PodExplanation, int, error) {
	key := ns + "/" + name
	pod, err := p.handle.SharedInformerFactory().Core().V1().Pods().Lister().Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return iv1.PodExplanation{}, http.StatusNotFound, fmt.Errorf("pod %s not found", key)
	}
	if err != nil {
		return iv1.PodExplanation{}, http.StatusInternalServerError, err
	}
	e := iv1.PodExplanation{Pod: key}
	if !p.ours(pod) {
		e.Summary = fmt.Sprintf("pod %s is not scheduled by this scheduler (its schedulerName is %q, this is %q)", key, pod.Spec.SchedulerName, p.schedulerName)
		return e, http.StatusOK, nil
	}
	req, err := p.request(pod)
	switch {
	case err != nil:
		e.Summary = fmt.Sprintf("pod %s cannot be scheduled: its request is invalid: %v", key, err)
		return e, http.StatusOK, nil
	case req == nil:
		e.Summary = fmt.Sprintf("pod %s asks for no leaf cells: hivesched leaves it to the other plugins", key)
		return e, http.StatusOK, nil
	}
	group := req.Group.Name
	g, holders, known := p.inspectGroup(group, true)
	if !known {
		have, want := p.groups.MemberCount(group), req.TotalPods()
		switch {
		case pod.Spec.NodeName != "":
			e.Summary = fmt.Sprintf("pod %s runs on node %s, but the scheduler does not hold its affinity group %s (it was not bound by hivesched, or its record was not trusted: see the pod's events)", key, pod.Spec.NodeName, group)
		case have < want:
			e.Summary = fmt.Sprintf("pod %s waits for its affinity group %s to be complete: %d of its %d pods exist; the group is placed all at once when every pod is created", key, group, have, want)
		default:
			if reason := p.vcs.Admits(req.Group.VirtualCluster, pod.Namespace); reason != "" {
				e.Summary = fmt.Sprintf("pod %s is refused: %s", key, reason)
			} else {
				e.Summary = fmt.Sprintf("pod %s of affinity group %s is queued: the scheduler has not decided its group yet", key, group)
			}
		}
		return e, http.StatusOK, nil
	}
	e.Group = &g
	for _, h := range holders {
		e.Holders = append(e.Holders, iv1.Holder{Group: h.Group, Priority: h.Priority, LeafCells: h.LeafCells,
			Preemptible: g.Priority >= 0 && h.Priority < g.Priority})
	}
	e.Summary = p.summarize(key, pod, &g, e.Holders)
	return e, http.StatusOK, nil
}

// summarize says in one or two sentences where a pod's group stands.
func (p *HiveSched) summarize(key string, pod *v1.Pod, g *iv1.AffinityGroup, holders []iv1.Holder) string {
	switch g.State {
	case cellcore.AGAllocated.String():
		where := "its cells are allocated; it binds to its node"
		if pod.Spec.NodeName != "" {
			where = "it runs on node " + pod.Spec.NodeName
		}
		s := fmt.Sprintf("pod %s: affinity group %s is Allocated in virtual cluster %q; %s", key, g.Name, g.VirtualCluster, where)
		if g.Downgraded {
			s += "; it was lazily preempted and runs as opportunistic (priority -1): any guaranteed group may preempt it"
		}
		return s
	case cellcore.AGBeingPreempted.String():
		return fmt.Sprintf("pod %s: affinity group %s is Being preempted: a higher priority group reserved its cells, and its pods are being deleted", key, g.Name)
	case cellcore.AGPreempting.String():
		return fmt.Sprintf("pod %s: affinity group %s is Preempting in virtual cluster %q: it waits for the pods of %s to be deleted, then binds on their cells",
			key, g.Name, g.VirtualCluster, joinNames(g.Victims))
	}
	// The core's reason names the group, its priority and VC.
	s := fmt.Sprintf("pod %s waits: its affinity group is Pending: %s", key, g.Reason)
	var lower []string
	var lowerCells int32
	for _, h := range holders {
		if h.Preemptible {
			lower = append(lower, h.Group)
			lowerCells += h.LeafCells
		}
	}
	if len(lower) > 0 {
		// Preempting them is not enough, or the core would have.
		s += fmt.Sprintf(" (lower priority groups hold %d more of the VC's leaf cells: %s; preempting them is not enough)", lowerCells, strings.Join(lower, ", "))
	}
	return s
}
