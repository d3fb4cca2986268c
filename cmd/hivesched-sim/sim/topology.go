package sim

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// Jobs that must stay inside one domain of a topology key (a GB200 NVL72
// rack's NVLink domain, nvidia.com/gpu.clique): the cell core places them
// under one cell of the level the key names (WithinTopologyKey); the quota
// baselines see the same domains through this file, read from the same
// configuration, to place them (quota-one-clique), to tell whether a
// topology-blind placement split one (every policy), and to measure the
// GPUs left idle inside fragmented domains.

// domain is one cell of a keyed level: the nodes under it.
type domain struct {
	id       string // the cell's address (its path of addresses if it has none)
	nodes    []string
	gpus     int64
	leafType string // "" if its nodes mix leaf types
}

// topology is every keyed level's domains, in the configuration's order.
type topology struct {
	domains map[string][]domain       // by key
	of      map[string]map[string]int // key -> node -> index in domains[key]
}

func newTopology(cfg cellcore.Config) *topology {
	tp := &topology{domains: map[string][]domain{}, of: map[string]map[string]int{}}
	type open struct {
		key string
		i   int
	}
	var walk func(c cellcore.PhysicalCellSpec, t, path string, in []open)
	walk = func(c cellcore.PhysicalCellSpec, t, path string, in []open) {
		if c.CellType != "" {
			t = c.CellType
		}
		ts := cfg.CellTypes[t]
		if key := ts.TopologyKey; key != "" {
			id := c.CellAddress
			if id == "" {
				id = path
			}
			tp.domains[key] = append(tp.domains[key], domain{id: id, leafType: leafTypeOf(cfg, t)})
			in = append(slices.Clip(in), open{key, len(tp.domains[key]) - 1})
		}
		if ts.IsNodeLevel {
			n, _ := leafCount(cfg, t)
			for _, o := range in {
				d := &tp.domains[o.key][o.i]
				d.nodes = append(d.nodes, c.CellAddress)
				d.gpus += int64(n)
				if tp.of[o.key] == nil {
					tp.of[o.key] = map[string]int{}
				}
				tp.of[o.key][c.CellAddress] = o.i
			}
			return
		}
		for i, ch := range c.CellChildren {
			walk(ch, ts.ChildCellType, path+"/"+strconv.Itoa(i), in)
		}
	}
	for i, c := range cfg.PhysicalCells {
		walk(c, c.CellType, strconv.Itoa(i), nil)
	}
	return tp
}

// split says whether pods on these nodes are not all inside one domain of
// key (a node in no domain of key counts as outside every one).
func (tp *topology) split(key string, pods []podAt) bool {
	of := tp.of[key]
	first := -1
	for _, pa := range pods {
		d, ok := of[pa.node]
		if !ok {
			return true
		}
		if first < 0 {
			first = d
		} else if d != first {
			return true
		}
	}
	return false
}

// domainShape is a waiting within-job's shape, for the fragmentation
// figure: Pods pods of Leaves leaf cells of LeafType ("" any).
type domainShape struct {
	pods, leaves int32
	leafType     string
}

// fits says whether s's pods all fit on d's free leaf cells (free(node),
// 0 for a failed node): per node, whole pods.
func (d *domain) fits(s domainShape, free func(string) int32) bool {
	if s.leafType != "" && d.leafType != "" && s.leafType != d.leafType {
		return false
	}
	var n int64
	for _, node := range d.nodes {
		n += int64(free(node) / s.leaves)
		if n >= int64(s.pods) {
			return true
		}
	}
	return false
}

// domainIdle measures one key's domains at one instant. free(node) is a
// node's free leaf cells, used(node) its leaf cells in use (both 0 on a
// failed node). waiting are the shapes of the within-jobs of this key that
// wait.
//   - frag: free GPUs in the domains that have some free and can host none
//     of the waiting shapes (0 when none waits): GPUs idle inside
//     fragmented domains while a job waits for one domain.
//   - partial: free GPUs in the domains that are partly in use (some GPUs
//     in use, some free): GPUs a whole-domain job cannot use, whatever
//     waits.
func domainIdle(ds []domain, free, used func(string) int32, waiting []domainShape) (frag, partial int64) {
	for i := range ds {
		d := &ds[i]
		var f, u int64
		for _, n := range d.nodes {
			f += int64(free(n))
			u += int64(used(n))
		}
		if f == 0 {
			continue
		}
		if u > 0 {
			partial += f
		}
		if len(waiting) == 0 {
			continue
		}
		host := false
		for _, s := range waiting {
			if d.fits(s, free) {
				host = true
				break
			}
		}
		if !host {
			frag += f
		}
	}
	return frag, partial
}

// keysAbove are the topology keys of the types above cell type t in cfg
// (nearest first) that t's own chain does not name at or below t: the
// domains a cell of type t lies inside in the shared cluster.
func keysAbove(cfg cellcore.Config, t string) []string {
	below := map[string]bool{}
	for x := t; ; {
		ts, ok := cfg.CellTypes[x]
		if !ok {
			break
		}
		if ts.TopologyKey != "" {
			below[ts.TopologyKey] = true
		}
		x = ts.ChildCellType
	}
	var keys []string
	seen := map[string]bool{t: true}
	level := []string{t}
	for len(level) > 0 {
		var next []string
		for _, n := range slices.Sorted(maps.Keys(cfg.CellTypes)) {
			ts := cfg.CellTypes[n]
			if seen[n] || !slices.Contains(level, ts.ChildCellType) {
				continue
			}
			seen[n] = true
			next = append(next, n)
			if k := ts.TopologyKey; k != "" && !below[k] && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		level = next
	}
	return keys
}

// privateDomainType wraps cell type t, for a private reference, in one
// cell type per key in keys (innermost first), each of one child, so
// that a VC's cell of a part of a domain (half an NVL72 rack) is, on its
// private cluster, a domain of those keys by itself: the shared cluster
// keeps such a cell inside one domain, and a within-job of the VC that
// fits the cell is promised to stay there. It returns the outermost
// type's name (t itself if keys is empty) and adds the types to types.
func privateDomainType(types map[string]cellcore.CellTypeSpec, t string, keys []string) string {
	inner := t
	for i, k := range keys {
		name := fmt.Sprintf("%s-DOMAIN%d", t, i)
		types[name] = cellcore.CellTypeSpec{ChildCellType: inner, ChildCellNumber: 1, TopologyKey: k}
		inner = name
	}
	return inner
}
