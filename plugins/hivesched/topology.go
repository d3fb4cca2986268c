package hivesched

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/apis/config"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/cellspec"
	"github.com/hivesched/hivesched/plugins/dra"
)

// The physical cluster derived from ResourceSlices, kept in step with them
// at run time (physicalClusterFrom ResourceSlices; docs/dra.md, "Topology
// from ResourceSlices"). Node and slice events only kick a worker; the
// worker, off the scheduling path, waits for the events to settle, derives
// the cluster from the informers' caches and hands it to the core
// (ReplacePhysicalCluster), which takes it whole or not at all.
//
// A change the core refuses (a VC would not fit, a running group would lose
// its cells) is not dropped: what is safe is applied, the rest waits.
// The nodes the change removes or reshapes stay as the cells were (their
// old Node and slices are used for them), and their leaves whose device is
// gone are bad (the leaf health path: nothing new is placed there); nodes
// that are new join. The refused VCs' status says Rejected with what the
// change was; the change is tried again when slices, nodes or VCs change,
// and every topologyRetry meanwhile.

const (
	// topologySettle: events closer together than this are one change (a
	// driver that republishes its slices deletes and creates them).
	topologySettle = time.Second
	// topologyRetry: a refused change is tried again this often even when
	// nothing kicks it.
	topologyRetry = 30 * time.Second
)

// sliceTopo is the state of the derived physical cluster.
type sliceTopo struct {
	args *config.HiveSchedArgs
	kick chan struct{}

	mu sync.Mutex
	// applied: the inputs the core's cells were derived from, by node (a
	// node's slices of the driver), and the cluster derived from them.
	applied    topoInputs
	appliedCfg config.PhysicalClusterSpec
	// missing: per node of the core's cells, the leaves whose device the
	// slices no longer publish (bad until the device is back or the node
	// leaves the cells).
	missing map[string][]int32
	// refused: the change that waits, for logs ("" if none).
	refused string
}

// topoInputs are Nodes and their slices of the driver.
type topoInputs struct {
	nodes  map[string]*v1.Node
	slices map[string][]*resourceapi.ResourceSlice
}

func newTopoInputs(nodes []*v1.Node, slices []*resourceapi.ResourceSlice, driver string) topoInputs {
	in := topoInputs{nodes: map[string]*v1.Node{}, slices: map[string][]*resourceapi.ResourceSlice{}}
	for _, n := range nodes {
		in.nodes[n.Name] = n
	}
	for _, s := range slices {
		if s.Spec.Driver == driver && s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
			in.slices[*s.Spec.NodeName] = append(in.slices[*s.Spec.NodeName], s)
		}
	}
	return in
}

func (in topoInputs) lists() ([]*v1.Node, []*resourceapi.ResourceSlice) {
	nodes := make([]*v1.Node, 0, len(in.nodes))
	for _, n := range in.nodes {
		nodes = append(nodes, n)
	}
	var slices []*resourceapi.ResourceSlice
	for _, ss := range in.slices {
		slices = append(slices, ss...)
	}
	return nodes, slices
}

// holding is in with the nodes of hold as they are in old (gone if old
// has none of them).
func (in topoInputs) holding(old topoInputs, hold []string) topoInputs {
	out := topoInputs{nodes: map[string]*v1.Node{}, slices: map[string][]*resourceapi.ResourceSlice{}}
	for n, v := range in.nodes {
		out.nodes[n] = v
	}
	for n, v := range in.slices {
		out.slices[n] = v
	}
	for _, n := range hold {
		delete(out.nodes, n)
		delete(out.slices, n)
		if v, ok := old.nodes[n]; ok {
			out.nodes[n] = v
		}
		if v, ok := old.slices[n]; ok {
			out.slices[n] = v
		}
	}
	return out
}

// newSliceTopo starts from the inputs New derived the core's cells from.
func newSliceTopo(args *config.HiveSchedArgs, in topoInputs, cfg config.PhysicalClusterSpec) *sliceTopo {
	return &sliceTopo{args: args, kick: make(chan struct{}, 1), applied: in, appliedCfg: cfg, missing: map[string][]int32{}}
}

// Kick asks the worker to look again; it never blocks.
func (t *sliceTopo) Kick() {
	if t == nil {
		return
	}
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// kickIfRefused asks again only while a change waits (a VC changed: it may
// fit now).
func (t *sliceTopo) kickIfRefused() {
	if t == nil {
		return
	}
	t.mu.Lock()
	refused := t.refused != ""
	t.mu.Unlock()
	if refused {
		t.Kick()
	}
}

// missingOf are the node's leaves without a device.
func (t *sliceTopo) missingOf(node string) []int32 {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.missing[node]
}

// topologyHandlers kick the worker on what can change the derived cells: a
// node added, deleted or relabelled, any slice of the driver.
func (p *HiveSched) topologyHandlers() (nodes, slices cache.ResourceEventHandler) {
	driver := p.topo.args.DRA.Driver
	ofDriver := func(obj interface{}) bool {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		s, ok := obj.(*resourceapi.ResourceSlice)
		return ok && s.Spec.Driver == driver
	}
	nodes = cache.ResourceEventHandlerFuncs{
		AddFunc: func(interface{}) { p.topo.Kick() },
		UpdateFunc: func(o, n interface{}) {
			on, ok1 := o.(*v1.Node)
			nn, ok2 := n.(*v1.Node)
			if !ok1 || !ok2 || !equality.Semantic.DeepEqual(on.Labels, nn.Labels) {
				p.topo.Kick()
			}
		},
		DeleteFunc: func(interface{}) { p.topo.Kick() },
	}
	slices = cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if ofDriver(obj) {
				p.topo.Kick()
			}
		},
		UpdateFunc: func(o, n interface{}) {
			if ofDriver(o) || ofDriver(n) {
				p.topo.Kick()
			}
		},
		DeleteFunc: func(obj interface{}) {
			if ofDriver(obj) {
				p.topo.Kick()
			}
		},
	}
	return nodes, slices
}

// runTopology is the worker: it waits for the caches, then reconciles
// after each settled burst of events, and every topologyRetry while a
// change waits.
func (p *HiveSched) runTopology(ctx context.Context, synced ...cache.InformerSynced) {
	logger := klog.FromContext(ctx).WithName("slicetopology")
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	p.topo.Kick() // what changed between New's list and the caches
	retry := time.NewTicker(topologyRetry)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.topo.kick:
		case <-retry.C:
			p.topo.mu.Lock()
			refused := p.topo.refused != ""
			p.topo.mu.Unlock()
			if !refused {
				continue
			}
		}
		// Let the burst settle: a kick meanwhile is part of this change.
		select {
		case <-ctx.Done():
			return
		case <-time.After(topologySettle):
		}
		select {
		case <-p.topo.kick:
		default:
		}
		nodes, err := p.handle.SharedInformerFactory().Core().V1().Nodes().Lister().List(labels.Everything())
		if err != nil {
			continue
		}
		slices, err := p.handle.SharedInformerFactory().Resource().V1().ResourceSlices().Lister().List(labels.Everything())
		if err != nil {
			continue
		}
		p.reconcileTopology(logger, newTopoInputs(nodes, slices, p.topo.args.DRA.Driver))
	}
}

// reconcileTopology hands the cluster derived from in to the core, or
// what of it is safe (see the top of the file).
func (p *HiveSched) reconcileTopology(logger klog.Logger, in topoInputs) {
	t := p.topo
	derive := func(in topoInputs) (config.PhysicalClusterSpec, bool) {
		nodes, slices := in.lists()
		// Every try says the same of the nodes left out: at V(2); what
		// changes is logged below.
		cfg, err := deriveCluster(logger.V(2), t.args, nodes, slices)
		if err != nil {
			logger.Error(err, "physical cluster from ResourceSlices: the cells stay as they are")
			return cfg, false
		}
		return cfg, true
	}
	t.mu.Lock()
	applied, appliedCfg := t.applied, t.appliedCfg
	t.mu.Unlock()
	want, ok := derive(in)
	if !ok {
		// No cells at all (every slice gone): the core keeps its cells,
		// and the leaves whose device is gone are bad.
		p.markMissing(logger, applied, in)
		return
	}

	var refused *cellcore.PhysicalChangeResult
	if !equality.Semantic.DeepEqual(want, appliedCfg) {
		res, err := p.core.ReplacePhysicalCluster(cellspec.Config(want))
		if err != nil {
			logger.Error(err, "physical cluster from ResourceSlices: the core refuses the derived cells as invalid; they stay as they are")
			return
		}
		if res.Applied {
			p.topologyApplied(logger, res, in, want)
			applied, appliedCfg = in, want
		} else {
			refused = &res
			// What is safe: the nodes the change removes or reshapes as
			// they were, every other node as it is now.
			hold := append(append([]string(nil), res.RemovedNodes...), res.ChangedNodes...)
			safeIn := in.holding(applied, hold)
			if safe, ok := derive(safeIn); ok && !equality.Semantic.DeepEqual(safe, appliedCfg) {
				sres, err := p.core.ReplacePhysicalCluster(cellspec.Config(safe))
				switch {
				case err != nil:
					logger.Error(err, "physical cluster from ResourceSlices: the core refuses the safe part of the change as invalid")
				case sres.Applied:
					p.topologyApplied(logger, sres, safeIn, safe)
					applied, appliedCfg = safeIn, safe
				default:
					logger.Info("physical cluster from ResourceSlices: even the part of the change that keeps the removed and changed nodes is refused; nothing of it is applied",
						"rejected", sres.Rejected, "stranded", sres.Stranded)
				}
			}
		}
	}
	p.topologyRefused(logger, refused)
	p.markMissing(logger, applied, in)
}

// topologyApplied records an applied change and brings the core's new and
// reshaped nodes up to date (health, devices), lets the VCs it refused
// before try again, and requeues the waiting pods.
func (p *HiveSched) topologyApplied(logger klog.Logger, res cellcore.PhysicalChangeResult, in topoInputs, cfg config.PhysicalClusterSpec) {
	t := p.topo
	t.mu.Lock()
	t.applied, t.appliedCfg = in, cfg
	t.mu.Unlock()
	ct := cellspec.NewCellTypes(cfg)
	p.cellTypes.Store(&ct)
	logger.Info("physical cluster changed with the ResourceSlices", "addedNodes", res.AddedNodes, "removedNodes", res.RemovedNodes,
		"changedNodes", res.ChangedNodes, "cancelledPreemptions", res.Cancelled)
	lister := p.handle.SharedInformerFactory().Core().V1().Nodes().Lister()
	var added []string
	present := map[string]bool{}
	for _, name := range append(append([]string(nil), res.AddedNodes...), res.ChangedNodes...) {
		if n, err := lister.Get(name); err == nil {
			present[name] = true
			p.onNode(logger, n, false)
		} else {
			added = append(added, name) // an absent node padding a short group
		}
		p.sliceNode(logger, name)
	}
	p.markAbsent(logger, added, present)
	for _, vc := range p.vcs.RejectedObjects() {
		p.applyVC(logger, vc)
	}
	p.vcs.Changed()
	p.activateWaiting(logger, "")
}

// topologyRefused marks the VCs a refused change would not fit, or clears
// the marks (res nil: nothing waits).
func (p *HiveSched) topologyRefused(logger klog.Logger, res *cellcore.PhysicalChangeResult) {
	t := p.topo
	reasons := map[string]string{}
	what := ""
	if res != nil {
		what = describeChange(res)
		for _, r := range res.Rejected {
			reasons[r.Name] = fmt.Sprintf("the physical cluster derived from ResourceSlices changed (%s) and this virtual cluster would not fit it: %s; the change waits (the nodes it removes or changes keep their cells, with the devices gone marked bad) until the virtual cells fit or the slices come back",
				what, r.Reason)
		}
	}
	t.mu.Lock()
	was := t.refused
	t.refused = what
	t.mu.Unlock()
	if p.vcs.SetPhysicalRejections(reasons) || was != what {
		if res != nil {
			vcs := make([]string, 0, len(res.Rejected))
			for _, r := range res.Rejected {
				vcs = append(vcs, r.Name)
			}
			logger.Info("physical cluster from ResourceSlices: change refused, it waits", "change", what,
				"rejectedVirtualClusters", vcs, "strandedGroups", res.Stranded)
			for _, r := range res.Rejected {
				if vc := p.vcs.Object(r.Name); vc != nil {
					p.event(vc, v1.EventTypeWarning, "Rejected", reasons[r.Name])
				}
			}
		} else if was != "" {
			logger.Info("physical cluster from ResourceSlices: no change waits any more", "was", was)
		}
	}
}

// describeChange names the nodes of a change.
func describeChange(res *cellcore.PhysicalChangeResult) string {
	var parts []string
	list := func(what string, nodes []string) {
		if len(nodes) > 0 {
			parts = append(parts, what+" "+strings.Join(nodes, ", "))
		}
	}
	list("nodes removed:", res.RemovedNodes)
	list("nodes changed:", res.ChangedNodes)
	list("nodes added:", res.AddedNodes)
	if len(res.Stranded) > 0 {
		parts = append(parts, "affinity groups holding cells that would go: "+strings.Join(res.Stranded, ", "))
	}
	if len(parts) == 0 {
		return "cells changed"
	}
	return strings.Join(parts, "; ")
}

// markMissing marks bad the leaves of the core's cells (derived from
// applied) whose device the slices (in) no longer publish, and unmarks
// those that came back.
func (p *HiveSched) markMissing(logger klog.Logger, applied, in topoInputs) {
	t := p.topo
	had := dra.NewSlices(t.args.DRA.Driver)
	for _, ss := range applied.slices {
		for _, s := range ss {
			had.Update(s, false)
		}
	}
	now := dra.NewSlices(t.args.DRA.Driver)
	for _, ss := range in.slices {
		for _, s := range ss {
			now.Update(s, false)
		}
	}
	missing := map[string][]int32{}
	for _, node := range had.NodeNames() {
		_, complete := now.HasDevices(node)
		cur := now.Devices(node)
		for ix := range had.Devices(node) {
			if _, ok := cur[ix]; !ok || !complete {
				missing[node] = append(missing[node], ix)
			}
		}
		sort.Slice(missing[node], func(i, j int) bool { return missing[node][i] < missing[node][j] })
	}
	t.mu.Lock()
	old := t.missing
	t.missing = missing
	t.mu.Unlock()
	for node := range old {
		if _, ok := missing[node]; !ok {
			p.sliceNode(logger, node)
		}
	}
	for node, ix := range missing {
		if !slices.Equal(old[node], ix) {
			logger.Info("devices of the physical cluster's cells are gone from the ResourceSlices: their leaf cells are bad", "node", node, "leaves", ix)
			p.sliceNode(logger, node)
		}
	}
}

// sliceNode hands a node's slice-side device health to the core: the
// driver's device taints (with GPU claims on) and the leaves whose device
// is gone.
func (p *HiveSched) sliceNode(logger klog.Logger, node string) {
	if p.dra != nil {
		p.draNode(logger, node, true)
		return
	}
	if p.devices.SetSliceHealth(logger, node, p.sliceHealth(node)) {
		p.vcs.Changed()
		p.activateWaiting(logger, "")
	}
}

// sliceHealth is what the slices say of a node's leaves: the driver's
// device taints, and (physicalClusterFrom ResourceSlices) leaves whose
// device is gone are bad.
func (p *HiveSched) sliceHealth(node string) []cellcore.DeviceStatus {
	var out []cellcore.DeviceStatus
	if p.dra != nil {
		out = p.dra.SliceHealth(node)
	}
	missing := p.topo.missingOf(node)
	if len(missing) == 0 {
		return out
	}
	bad := map[int32]bool{}
	for _, d := range out {
		bad[d.Index] = true
	}
	for _, ix := range missing {
		if !bad[ix] {
			out = append(out, cellcore.DeviceStatus{Index: ix, Health: cellcore.DeviceBad})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}
