package chaos

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/cellspec"
	"github.com/hivesched/hivesched/plugins/devices"
	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/plugins/placement"
)

// snapshot is the cluster as the API server has it: every check reads API
// objects only, never the scheduler's memory or logs. Pods come from one
// List, a consistent read at one resourceVersion.
type snapshot struct {
	at    time.Time
	pods  []v1.Pod
	nodes []v1.Node
	vcs   []hv1.VirtualCluster
}

func (h *harness) take(ctx context.Context) (*snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s := &snapshot{at: time.Now()}
	pods, err := h.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	nodes, err := h.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	vcs, err := h.vcs.HiveschedV1alpha1().VirtualClusters().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s.pods, s.nodes, s.vcs = pods.Items, nodes.Items, vcs.Items
	return s, nil
}

// live: the pod holds its devices (a terminating pod does until it is gone).
func live(p *v1.Pod) bool {
	return p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
}

func ours(p *v1.Pod) bool { return p.Spec.SchedulerName == "hivesched" }

// placed is a bound hivesched pod with a record hivesched signed for it.
type placed struct {
	pod  *v1.Pod
	spec cellcore.AffinityGroupSpec
	rp   cellcore.RecoveredPod
}

// cellLess: the placement record is of a gang member that asks for no leaf
// cells (its record names no cells, and no device indices are written).
func cellLess(raw string) bool {
	rec, err := placement.Decode(raw)
	return err == nil && rec.CellLess()
}

func (p placed) guaranteed() bool { return p.spec.Priority >= 0 && !p.rp.Downgraded }

// placements returns the bound, live hivesched pods and, strictly, every
// bound pod of ours without a placement that the scheduler signed for it.
func (h *harness) placements(s *snapshot) ([]placed, []string) {
	var out []placed
	var bad []string
	for i := range s.pods {
		p := &s.pods[i]
		if !ours(p) || p.Spec.NodeName == "" || !live(p) {
			continue
		}
		id := p.Namespace + "/" + p.Name
		raw, ok := p.Annotations[hivesched.AnnotationPlacement]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("pod %s is bound to %s without %s", id, p.Spec.NodeName, hivesched.AnnotationPlacement))
			continue
		case p.Annotations[hivesched.AnnotationPlacementSignature] != placement.Signature(h.key, p):
			bad = append(bad, fmt.Sprintf("pod %s: its placement record is not signed for it", id))
			continue
		case p.Annotations[hivesched.AnnotationLeafCellIndices] == "" && !cellLess(raw):
			bad = append(bad, fmt.Sprintf("pod %s is bound without %s", id, hivesched.AnnotationLeafCellIndices))
			continue
		}
		spec, rp, err := placement.Recorded(p)
		if err != nil {
			bad = append(bad, fmt.Sprintf("pod %s: %v (%q)", id, err, raw))
			continue
		}
		if len(rp.LeafCellIndices) == 0 {
			continue // a gang's member without cells: nothing of the core's
		}
		if rp.Node != p.Spec.NodeName {
			bad = append(bad, fmt.Sprintf("pod %s is on %s but its record names %s", id, p.Spec.NodeName, rp.Node))
			continue
		}
		out = append(out, placed{p, spec, rp})
	}
	return out, bad
}

// doubleBooked returns every (node, device index) that two live pods use,
// from the pods' hivesched.io/leaf-cell-indices.
func doubleBooked(s *snapshot) []string {
	used := map[string]string{}
	var bad []string
	for i := range s.pods {
		p := &s.pods[i]
		idx := p.Annotations[hivesched.AnnotationLeafCellIndices]
		if p.Spec.NodeName == "" || idx == "" || !live(p) {
			continue
		}
		for _, x := range strings.Split(idx, ",") {
			k := p.Spec.NodeName + "/" + strings.TrimSpace(x)
			id := p.Namespace + "/" + p.Name
			if other, dup := used[k]; dup {
				bad = append(bad, fmt.Sprintf("device %s is used by %s and %s", k, other, id))
			}
			used[k] = id
		}
	}
	return bad
}

// gangState is one gang of hivesched pods by the driver's gang label.
type gangState struct {
	key                       string
	members                   int // group-members
	pods, bound, boundRunning int // live pods; bound; bound and not terminating
	terminating               int
}

func gangs(s *snapshot) map[string]*gangState {
	out := map[string]*gangState{}
	for i := range s.pods {
		p := &s.pods[i]
		name := p.Labels[labelGang]
		if !ours(p) || name == "" || !live(p) {
			continue
		}
		k := p.Namespace + "/" + name
		g := out[k]
		if g == nil {
			n, _ := strconv.Atoi(p.Annotations[annotationMembers])
			g = &gangState{key: k, members: n}
			out[k] = g
		}
		g.pods++
		if p.DeletionTimestamp != nil {
			g.terminating++
		}
		if p.Spec.NodeName != "" {
			g.bound++
			if p.DeletionTimestamp == nil {
				g.boundRunning++
			}
		}
	}
	return out
}

// partial: some members bound and running, not all. A gang whose victims'
// deletion is under way is partial too, for as long as that takes.
func (g *gangState) partial() bool { return g.boundRunning > 0 && g.boundRunning < g.members }

// usage sums the leaf cells of bound, live pods per VC and leaf cell type:
// guaranteed (priority >= 0 and not downgraded) and opportunistic.
type usage struct{ guaranteed, opportunistic map[string]map[string]int32 }

func usageOf(ps []placed) usage {
	u := usage{map[string]map[string]int32{}, map[string]map[string]int32{}}
	for _, p := range ps {
		m := u.opportunistic
		if p.guaranteed() {
			m = u.guaranteed
		}
		if m[p.spec.VirtualCluster] == nil {
			m[p.spec.VirtualCluster] = map[string]int32{}
		}
		m[p.spec.VirtualCluster][p.spec.LeafCellType] += int32(len(p.rp.LeafCellIndices))
	}
	return u
}

func sum(m map[string]int32) int32 {
	var n int32
	for _, v := range m {
		n += v
	}
	return n
}

// check runs the checks on one snapshot: double booking and bound pods
// without a placement fail at once (nothing legitimate shows them even for
// a moment); a partly bound gang and a VC's guaranteed use above its cells
// fail when they last longer than the window (gangWindow), because binding a
// gang's members and writing a lazily preempted group's record take time.
func (h *harness) check(s *snapshot, where string) {
	ps, bad := h.placements(s)
	bad = append(bad, doubleBooked(s)...)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fig.Checks++
	for _, b := range bad {
		h.violate(where + ": " + b)
	}
	partial := map[string]string{}
	for k, g := range gangs(s) {
		if g.partial() {
			partial[k] = fmt.Sprintf("gang %s is partly bound: %d of %d members bound and running", k, g.boundRunning, g.members)
		}
	}
	h.windowed("partial", partial, s.at, &h.fig.MaxPartialGang)
	over := map[string]string{}
	u := usageOf(ps)
	for vc, byLeaf := range u.guaranteed {
		for leaf, n := range byLeaf {
			limit, ok := h.caps[vc][leaf]
			if leaf == "" { // a group that names no leaf cell type: any of the VC's
				limit, ok = sum(h.caps[vc]), true
			}
			if !ok || n > limit {
				over[vc+"/"+leaf] = fmt.Sprintf("VC %s's guaranteed groups use %d %s leaf cells, it has %d", vc, n, leaf, limit)
			}
		}
	}
	h.windowed("overcap", over, s.at, &h.fig.MaxOverCap)
}

// windowed tracks how long each condition of a kind has held in consecutive
// snapshots; one that held longer than gangWindow is a violation (once).
func (h *harness) windowed(kind string, now map[string]string, at time.Time, longest *time.Duration) {
	eps := h.episodes[kind]
	if eps == nil {
		eps = map[string]*episode{}
		h.episodes[kind] = eps
	}
	for k := range eps {
		if _, still := now[k]; !still {
			delete(eps, k)
		}
	}
	for k, msg := range now {
		e := eps[k]
		if e == nil {
			e = &episode{since: at}
			eps[k] = e
		}
		d := at.Sub(e.since)
		if d > *longest {
			*longest = d
		}
		if d > h.o.gangWindow && !e.reported {
			e.reported = true
			h.violate(fmt.Sprintf("%s for %v (window %v)", msg, d.Round(time.Millisecond), h.o.gangWindow))
		}
	}
}

type episode struct {
	since    time.Time
	reported bool
}

// violate records a violation (h.mu held).
func (h *harness) violate(msg string) {
	h.fig.Violations++
	if len(h.violations) < 100 {
		h.violations = append(h.violations, time.Now().Format("15:04:05.000")+" "+msg)
	}
	h.t.Logf("VIOLATION: %s", msg)
}

// oracle is a cell core rebuilt from API objects alone, as a restarted
// scheduler would rebuild it: the physical cluster of the scheduler's
// configuration, node health, the VirtualClusters, and every bound group
// from its pods' signed records, highest priority first.
func (h *harness) oracle(s *snapshot, ps []placed) (*cellcore.Core, error) {
	core, err := cellcore.New(h.cfg)
	if err != nil {
		return nil, err
	}
	for i := range s.nodes {
		_ = core.SetNodeHealth(s.nodes[i].Name, devices.NodeHealth(&s.nodes[i])) // nodes outside the physical cluster are not its business
	}
	for i := range s.vcs {
		if _, err := core.SetVirtualCluster(cellspec.VirtualCluster(&s.vcs[i])); err != nil {
			return nil, fmt.Errorf("VC %s: %w", s.vcs[i].Name, err)
		}
	}
	groups := map[string][]placed{}
	for _, p := range ps {
		groups[p.spec.Name] = append(groups[p.spec.Name], p)
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := groups[names[i]][0].spec.Priority, groups[names[j]][0].spec.Priority
		if a != b {
			return a > b
		}
		return names[i] < names[j]
	})
	for _, n := range names {
		var rps []cellcore.RecoveredPod
		for _, p := range groups[n] {
			rps = append(rps, p.rp)
		}
		if _, err := core.RecoverAffinityGroup(groups[n][0].spec, rps); err != nil {
			return nil, fmt.Errorf("group %s does not recover from its records: %w", n, err)
		}
	}
	return core, nil
}

// unsettled lists what keeps the cluster from being settled once churn
// stops: terminating pods, partly bound gangs, and pending gangs of the
// driver that fit: a core rebuilt from the API objects would place them now
// (or preempt for them). Everything that fits must be bound.
func (h *harness) unsettled(s *snapshot, live []*gang) []string {
	var out []string
	gs := gangs(s)
	for _, p := range s.pods {
		if ours(&p) && p.DeletionTimestamp != nil {
			out = append(out, "pod "+p.Namespace+"/"+p.Name+" is terminating")
		}
	}
	for k, g := range gs {
		if g.partial() {
			out = append(out, fmt.Sprintf("gang %s has %d of %d members bound", k, g.boundRunning, g.members))
		}
	}
	ps, _ := h.placements(s)
	for _, g := range live {
		st := gs[g.key()]
		if st == nil || st.pods < g.n || st.bound > 0 {
			continue // gone (preempted), incomplete, or bound
		}
		core, err := h.oracle(s, ps)
		if err != nil {
			out = append(out, "oracle: "+err.Error())
			return out
		}
		d, err := core.Schedule(g.spec())
		if err != nil {
			out = append(out, fmt.Sprintf("gang %s: the core refuses it: %v", g.key(), err))
			continue
		}
		if d.Kind != cellcore.Wait {
			out = append(out, fmt.Sprintf("gang %s (%s, priority %d, %dx%d %s) is pending, but a core rebuilt from the API objects says %s (victims %v)",
				g.key(), g.vc, g.priority, g.n, g.gpus, g.leaf, d.Kind, d.Victims))
		}
	}
	sort.Strings(out)
	return out
}

// statusLag lists the VCs whose status differs from the truth: used and
// opportunistic leaf cells summed from the bound pods' records, and the
// VC's leaf cells.
func (h *harness) statusLag(s *snapshot) []string {
	ps, _ := h.placements(s)
	u := usageOf(ps)
	var out []string
	for _, vc := range s.vcs {
		st := vc.Status
		used, opp, total := sum(u.guaranteed[vc.Name]), sum(u.opportunistic[vc.Name]), sum(h.caps[vc.Name])
		if st.UsedLeafCells != used || st.OpportunisticLeafCells != opp || st.TotalLeafCells != total {
			out = append(out, fmt.Sprintf("VC %s status says used %d, opportunistic %d, total %d; the pods say %d, %d, %d",
				vc.Name, st.UsedLeafCells, st.OpportunisticLeafCells, st.TotalLeafCells, used, opp, total))
		}
	}
	return out
}

// capacities returns each VC's leaf cells per leaf cell type, from a core
// that holds the VCs and nothing else.
func capacities(cfg cellcore.Config, vcs []hv1.VirtualCluster) (map[string]map[string]int32, error) {
	core, err := cellcore.New(cfg)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]int32{}
	for i := range vcs {
		if _, err := core.SetVirtualCluster(cellspec.VirtualCluster(&vcs[i])); err != nil {
			return nil, err
		}
		st, _ := core.VirtualClusterStatus(vcs[i].Name)
		m := map[string]int32{}
		for _, c := range st.Cells {
			m[c.LeafCellType] += c.LeafCells
		}
		for _, c := range st.PinnedCells {
			m[c.LeafCellType] += c.LeafCells
		}
		out[vcs[i].Name] = m
	}
	return out, nil
}
