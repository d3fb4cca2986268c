package sim

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// cellPlacer is hivesched: the real cell core decides (cells, buddy
// allocation, VC binding, its preemption), as the scheduler's PreFilter
// does; a Preempt decision's victims are deleted at once and the group is
// decided again, as the scheduler does once the victims are gone.
type cellPlacer struct {
	k   *cellcore.Core
	cfg cellcore.Config
	// quota is each VC's leaf cells; guar what its guaranteed (not
	// downgraded) runs hold, by run name in held: for headroom only, the
	// core decides.
	quota map[string]int64
	guar  map[string]int64
	held  map[string]*run
	topo  *topology
}

func newCellPlacer(cfg cellcore.Config, vcs []cellcore.VirtualClusterSpec) (*cellPlacer, error) {
	k, err := cellcore.New(cfg)
	if err != nil {
		return nil, err
	}
	quota, err := vcQuotas(cfg, vcs)
	if err != nil {
		return nil, err
	}
	p := &cellPlacer{k: k, cfg: cfg, quota: quota, guar: map[string]int64{}, held: map[string]*run{}, topo: newTopology(cfg)}
	// In the configuration's order: the core's free lists keep the order
	// nodes became healthy, and a map's order would make runs with
	// failures differ from one to the next.
	for _, n := range nodeOrder(cfg) {
		if err := k.SetNodeHealth(n, cellcore.NodeHealthy); err != nil {
			return nil, err
		}
	}
	for _, vc := range vcs {
		if _, err := k.SetVirtualCluster(vc); err != nil {
			return nil, fmt.Errorf("virtual cluster %s: %w", vc.Name, err)
		}
	}
	return p, nil
}

func (p *cellPlacer) nodes() map[string]int32 { return nodeCapacities(p.cfg) }

func (p *cellPlacer) topology() *topology { return p.topo }

func (p *cellPlacer) headroom(vc string) int64 { return p.quota[vc] - p.guar[vc] }

func (p *cellPlacer) setNodeUp(node string, up bool) error {
	h := cellcore.NodeBad
	if up {
		h = cellcore.NodeHealthy
	}
	return p.k.SetNodeHealth(node, h)
}

func podKey(r *run, i int) string { return fmt.Sprintf("%s/%d", r.name, i) }

func (p *cellPlacer) place(r *run) (outcome, error) {
	spec := cellcore.AffinityGroupSpec{Name: r.name, VirtualCluster: r.job.VC, Priority: r.job.Priority, LeafCellType: r.job.LeafType,
		LazyPreemptionEnable: r.job.Lazy, WithinTopologyKey: r.job.Within, Members: []cellcore.AffinityGroupMember{{PodNumber: r.job.Pods, LeafCellNumber: r.job.Leaves}}}
	var o outcome
	d, err := p.k.Schedule(spec)
	if err != nil {
		return o, err
	}
	p.downgrade(&o, d.Downgraded)
	if d.Kind == cellcore.Preempt {
		for _, v := range d.Victims {
			if err := p.kill(v); err != nil {
				return o, err
			}
			o.victims = append(o.victims, v)
		}
		if d, err = p.k.Schedule(spec); err != nil {
			return o, err
		}
		p.downgrade(&o, d.Downgraded)
	}
	if d.Kind != cellcore.Placed {
		return o, nil
	}
	o.pods = make([]podAt, len(d.Pods))
	for i := range d.Pods {
		pp, err := p.k.AssignPod(r.name, podKey(r, i), r.job.Leaves)
		if err != nil {
			return o, err
		}
		o.pods[i] = podAt{node: pp.Node, leaves: r.job.Leaves}
	}
	if r.job.Priority >= 0 {
		p.held[r.name] = r
		p.guar[r.job.VC] += r.job.GPUs()
	}
	o.ok = true
	return o, nil
}

// downgrade notes lazily preempted groups: they run on as opportunistic
// and no longer count against their VC's cells.
func (p *cellPlacer) downgrade(o *outcome, names []string) {
	for _, n := range names {
		if r := p.held[n]; r != nil {
			delete(p.held, n)
			p.guar[r.job.VC] -= r.job.GPUs()
		}
		o.downgraded = append(o.downgraded, n)
	}
}

// kill deletes a victim's pods, as the scheduler's evictor does.
func (p *cellPlacer) kill(name string) error {
	if r := p.held[name]; r != nil {
		delete(p.held, name)
		p.guar[r.job.VC] -= r.job.GPUs()
	}
	st, ok := p.k.AffinityGroupStatus(name)
	if !ok {
		return nil
	}
	for _, pp := range st.Pods {
		if pp.PodKey != "" {
			if _, err := p.k.DeletePod(name, pp.PodKey); err != nil {
				return err
			}
		}
	}
	if _, ok := p.k.AffinityGroupStatus(name); ok {
		_, err := p.k.DeleteAffinityGroup(name)
		return err
	}
	return nil
}

func (p *cellPlacer) finish(r *run) { _ = p.kill(r.name) }

// quotaPlacer is the baseline a GPU-count quota system gives: a VC may use
// up to its quota (the leaf cells of its virtual cells, counted, not
// placed), each pod goes on a node of its leaf cell type with room for it,
// chosen topology-blind: the first such node (first-fit), the fullest
// (best-fit) or the emptiest (spread). No preemption: within its quota a
// VC's jobs never need another VC's GPUs back. Opportunistic jobs count
// against their VC's quota too. They place a job that must stay inside one
// domain (Job.Within) as any other: topology-blind, possibly across
// domains (the report counts such jobs as split).
//
// one-clique is Kueue's topology-aware scheduling (KAI-Scheduler's
// topology constraints, Volcano's HyperNodes) on the same quota: a
// within-job starts only if one domain of its key has room for all its
// pods right now, in the domain with the fewest free GPUs that has (best
// fit among domains; ties: the configuration's order), its pods on that
// domain's fullest nodes with room; otherwise it waits. Other jobs are
// placed best-fit (packing, which leaves domains whole more often than
// spreading would). No reservation: nothing keeps a domain free for a
// tenant.
type quotaPlacer struct {
	cfg   cellcore.Config
	fit   string   // first-fit, best-fit, spread or one-clique
	names []string // node order of the configuration
	cap   map[string]int32
	free  map[string]int32
	down  map[string]bool
	ltype map[string]string
	quota map[string]int64
	used  map[string]int64
	topo  *topology
}

func newQuotaPlacer(cfg cellcore.Config, vcs []cellcore.VirtualClusterSpec, fit string) (*quotaPlacer, error) {
	quota, err := vcQuotas(cfg, vcs)
	if err != nil {
		return nil, err
	}
	p := &quotaPlacer{cfg: cfg, fit: fit, cap: nodeCapacities(cfg), free: map[string]int32{}, down: map[string]bool{}, ltype: nodeLeafTypes(cfg),
		quota: quota, used: map[string]int64{}, topo: newTopology(cfg)}
	p.names = nodeOrder(cfg)
	for _, n := range p.names {
		p.free[n] = p.cap[n]
	}
	return p, nil
}

// vcQuotas is each VC's leaf cells: its virtual cells' and pinned cells'.
func vcQuotas(cfg cellcore.Config, vcs []cellcore.VirtualClusterSpec) (map[string]int64, error) {
	quota := map[string]int64{}
	for _, vc := range vcs {
		quota[vc.Name] += 0
		for _, c := range vc.VirtualCells {
			n, ok := leafCount(cfg, c.CellType)
			if !ok {
				return nil, fmt.Errorf("virtual cluster %s: unknown cell type %s", vc.Name, c.CellType)
			}
			quota[vc.Name] += int64(n) * int64(c.CellNumber)
		}
		for _, pc := range vc.PinnedCells {
			quota[vc.Name] += pinnedLeaves(cfg, pc.PinnedCellID)
		}
	}
	return quota, nil
}

func (p *quotaPlacer) nodes() map[string]int32 { return p.cap }

func (p *quotaPlacer) topology() *topology { return p.topo }

func (p *quotaPlacer) headroom(vc string) int64 { return p.quota[vc] - p.used[vc] }

// setNodeUp: a failed node takes no pods until it is back (the engine has
// stopped the runs on it).
func (p *quotaPlacer) setNodeUp(node string, up bool) error {
	if up {
		delete(p.down, node)
	} else {
		p.down[node] = true
	}
	return nil
}

func (p *quotaPlacer) place(r *run) (outcome, error) {
	j := r.job
	var o outcome
	q, ok := p.quota[j.VC]
	if !ok {
		return o, fmt.Errorf("virtual cluster %q is not defined", j.VC)
	}
	if j.GPUs() > q {
		return o, fmt.Errorf("job %s asks for %d leaf cells, more than virtual cluster %s's quota of %d", j.ID, j.GPUs(), j.VC, q)
	}
	names, fit := p.names, p.fit
	if fit == "one-clique" {
		fit = "best-fit"
		if j.Within != "" {
			ds := p.topo.domains[j.Within]
			if len(ds) == 0 {
				return o, fmt.Errorf("job %s: within_topology_key %q names no level of the cluster", j.ID, j.Within)
			}
			var most int64
			for _, d := range ds {
				most = max(most, d.gpus)
			}
			if j.GPUs() > most {
				return o, fmt.Errorf("job %s asks for %d leaf cells in one domain of %q, more than its largest (%d)", j.ID, j.GPUs(), j.Within, most)
			}
			if p.used[j.VC]+j.GPUs() > q {
				return o, nil
			}
			if names = p.oneDomain(j, ds); names == nil {
				return o, nil
			}
		}
	}
	if p.used[j.VC]+j.GPUs() > q {
		return o, nil
	}
	pods := make([]podAt, 0, j.Pods)
	undo := func() {
		for _, pa := range pods {
			p.free[pa.node] += pa.leaves
		}
	}
	for i := int32(0); i < j.Pods; i++ {
		best := ""
		for _, n := range names {
			f := p.free[n]
			if f < j.Leaves || (j.LeafType != "" && p.ltype[n] != j.LeafType) || p.down[n] {
				continue
			}
			if best == "" {
				best = n
				if fit == "first-fit" {
					break
				}
				continue
			}
			if (fit == "best-fit" && f < p.free[best]) || (fit == "spread" && f > p.free[best]) {
				best = n
			}
		}
		if best == "" {
			undo()
			return o, nil
		}
		p.free[best] -= j.Leaves
		pods = append(pods, podAt{node: best, leaves: j.Leaves})
	}
	p.used[j.VC] += j.GPUs()
	o.pods, o.ok = pods, true
	return o, nil
}

// oneDomain is the nodes of the domain quota-one-clique places j in: of
// the domains with room for all its pods now, the one with the fewest
// free GPUs (first in the configuration's order on a tie); nil if none
// has room.
func (p *quotaPlacer) oneDomain(j *Job, ds []domain) []string {
	free := func(n string) int32 {
		if p.down[n] || (j.LeafType != "" && p.ltype[n] != j.LeafType) {
			return 0
		}
		return p.free[n]
	}
	best, bestFree := -1, int64(0)
	for i := range ds {
		if !ds[i].fits(domainShape{pods: j.Pods, leaves: j.Leaves, leafType: j.LeafType}, free) {
			continue
		}
		var f int64
		for _, n := range ds[i].nodes {
			f += int64(free(n))
		}
		if best < 0 || f < bestFree {
			best, bestFree = i, f
		}
	}
	if best < 0 {
		return nil
	}
	return ds[best].nodes
}

func (p *quotaPlacer) finish(r *run) {
	for _, pa := range r.pods {
		p.free[pa.node] += pa.leaves
	}
	p.used[r.job.VC] -= r.job.GPUs()
}

// privateConfig is a VC alone on a cluster of exactly its cells: one
// physical cell per virtual cell, of the same type. It is the reference
// for the sharing anomaly: how long a VC's jobs would wait had it bought
// its cells for itself.
//
// A virtual cell below a keyed level (half an NVL72 rack, under the
// nvidia.com/gpu.clique level) is, privately, a domain of that key by
// itself (privateDomainType): in the shared cluster it lies inside one
// domain, so a within-job of the VC that fits the cell has the promise of
// one domain, and nothing more (two such cells of a VC may be in different
// domains).
func privateConfig(cfg cellcore.Config, vc cellcore.VirtualClusterSpec) (cellcore.Config, cellcore.VirtualClusterSpec) {
	out := cellcore.Config{CellTypes: cfg.CellTypes}
	own := cellcore.VirtualClusterSpec{Name: vc.Name}
	cloned := false
	for _, c := range vc.VirtualCells {
		top := c.CellType
		if keys := keysAbove(cfg, c.CellType); len(keys) > 0 {
			if !cloned {
				out.CellTypes, cloned = maps.Clone(cfg.CellTypes), true
			}
			top = privateDomainType(out.CellTypes, c.CellType, keys)
		}
		for i := int32(0); i < c.CellNumber; i++ {
			pc := expandCell(cfg, c.CellType, fmt.Sprintf("%s-%s-%d", vc.Name, c.CellType, i))
			out.PhysicalCells = append(out.PhysicalCells, wrapCell(out.CellTypes, top, c.CellType, pc))
		}
		own.VirtualCells = append(own.VirtualCells, c)
	}
	return out, own
}

// wrapCell puts cell c of type t inside the wrapper types from top down to
// t (privateDomainType), one child each.
func wrapCell(types map[string]cellcore.CellTypeSpec, top, t string, c cellcore.PhysicalCellSpec) cellcore.PhysicalCellSpec {
	if top == t {
		return c
	}
	inner := wrapCell(types, types[top].ChildCellType, t, c)
	return cellcore.PhysicalCellSpec{CellType: top, CellAddress: c.CellAddress + "-" + top, CellChildren: []cellcore.PhysicalCellSpec{inner}}
}

// expandCell is a physical cell of type t whose node-level cells are named
// after prefix.
func expandCell(cfg cellcore.Config, t, prefix string) cellcore.PhysicalCellSpec {
	ts, ok := cfg.CellTypes[t]
	if !ok || ts.IsNodeLevel {
		return cellcore.PhysicalCellSpec{CellType: t, CellAddress: prefix}
	}
	c := cellcore.PhysicalCellSpec{CellType: t, CellAddress: prefix}
	for i := int32(0); i < ts.ChildCellNumber; i++ {
		c.CellChildren = append(c.CellChildren, expandCell(cfg, ts.ChildCellType, fmt.Sprintf("%s-%d", prefix, i)))
	}
	return c
}

// --- the configuration's nodes ---

func leafCount(cfg cellcore.Config, t string) (int32, bool) {
	ts, ok := cfg.CellTypes[t]
	if !ok {
		return 1, isLeafType(cfg, t)
	}
	n, ok := leafCount(cfg, ts.ChildCellType)
	return n * ts.ChildCellNumber, ok
}

func isLeafType(cfg cellcore.Config, t string) bool {
	for _, ts := range cfg.CellTypes {
		if ts.ChildCellType == t {
			return true
		}
	}
	return false
}

func leafTypeOf(cfg cellcore.Config, t string) string {
	for {
		ts, ok := cfg.CellTypes[t]
		if !ok {
			return t
		}
		t = ts.ChildCellType
	}
}

// walkNodes calls fn for every node-level cell: its name, leaf cells and
// leaf type, in the configuration's order.
func walkNodes(cfg cellcore.Config, fn func(name string, leaves int32, leafType string)) {
	var walk func(c cellcore.PhysicalCellSpec, t string)
	walk = func(c cellcore.PhysicalCellSpec, t string) {
		if c.CellType != "" {
			t = c.CellType
		}
		ts := cfg.CellTypes[t]
		if ts.IsNodeLevel {
			n, _ := leafCount(cfg, t)
			fn(c.CellAddress, n, leafTypeOf(cfg, t))
			return
		}
		for _, ch := range c.CellChildren {
			walk(ch, ts.ChildCellType)
		}
	}
	for _, c := range cfg.PhysicalCells {
		walk(c, c.CellType)
	}
}

func nodeCapacities(cfg cellcore.Config) map[string]int32 {
	m := map[string]int32{}
	walkNodes(cfg, func(n string, l int32, _ string) { m[n] = l })
	return m
}

func nodeLeafTypes(cfg cellcore.Config) map[string]string {
	m := map[string]string{}
	walkNodes(cfg, func(n string, _ int32, t string) { m[n] = t })
	return m
}

func nodeOrder(cfg cellcore.Config) []string {
	var out []string
	walkNodes(cfg, func(n string, _ int32, _ string) { out = append(out, n) })
	return slices.Clip(out)
}

func pinnedLeaves(cfg cellcore.Config, id string) int64 {
	var found int64
	var walk func(c cellcore.PhysicalCellSpec, t string)
	walk = func(c cellcore.PhysicalCellSpec, t string) {
		if c.CellType != "" {
			t = c.CellType
		}
		if c.PinnedCellID == id {
			n, _ := leafCount(cfg, t)
			found = int64(n)
			return
		}
		for _, ch := range c.CellChildren {
			walk(ch, cfg.CellTypes[t].ChildCellType)
		}
	}
	for _, c := range cfg.PhysicalCells {
		walk(c, c.CellType)
	}
	return found
}
