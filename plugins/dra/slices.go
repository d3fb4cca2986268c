package dra

import (
	"sort"
	"strconv"
	"sync"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// The leaf cells of a node are the devices of the node's ResourceSlices of
// the GPU driver (NVIDIA's gpu-kubelet-plugin publishes one node-local pool
// named after the node, devices gpu-<minor>). Leaf cell i is the device
// whose name ends in the number i, among the devices whose attribute "type",
// where the driver sets one, is "gpu" (NVIDIA also publishes MIG devices,
// type mig, and with passthrough gpu-vfio-<i>, type vfio: they are not leaf
// cells). Only the pool's newest generation counts, and a pool counts once
// all its slices of that generation are seen (the allocator ignores
// incomplete pools the same way).

// Device is one leaf cell's device.
type Device struct {
	Pool string
	Name string
	// Tainted names a taint with effect NoSchedule or NoExecute (NVIDIA's
	// gpu.nvidia.com/xid and gpu-lost): the device is bad.
	Tainted string
}

type nodeDevices struct {
	complete bool
	byIndex  map[int32]Device
	slices   []*resourceapi.ResourceSlice // the pools' newest generation
}

// Slices indexes the GPU driver's ResourceSlices by node. It is fed by the
// ResourceSlice informer and read on the binding path and by the claim
// tracker; it never calls the API server.
type Slices struct {
	driver string

	mu     sync.RWMutex
	all    map[string]*resourceapi.ResourceSlice // by slice name, the driver's node-local slices
	byNode map[string]map[string]*resourceapi.ResourceSlice
	nodes  map[string]*nodeDevices
	// leaves maps a device (driver, pool, name) to its node and index.
	leaves map[deviceKey]leafRef
}

type deviceKey struct{ pool, name string }

type leafRef struct {
	node  string
	index int32
}

// NewSlices indexes the slices of driver.
func NewSlices(driver string) *Slices {
	return &Slices{driver: driver, all: map[string]*resourceapi.ResourceSlice{}, byNode: map[string]map[string]*resourceapi.ResourceSlice{},
		nodes: map[string]*nodeDevices{}, leaves: map[deviceKey]leafRef{}}
}

// Driver is the GPU driver.
func (x *Slices) Driver() string { return x.driver }

// Update records a slice (added, changed or deleted) and returns the nodes
// whose devices it may have changed.
func (x *Slices) Update(s *resourceapi.ResourceSlice, deleted bool) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var nodes []string
	if old, ok := x.all[s.Name]; ok {
		node := *old.Spec.NodeName
		delete(x.all, s.Name)
		delete(x.byNode[node], s.Name)
		nodes = append(nodes, node)
	}
	if !deleted && s.Spec.Driver == x.driver && s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
		node := *s.Spec.NodeName
		x.all[s.Name] = s
		if x.byNode[node] == nil {
			x.byNode[node] = map[string]*resourceapi.ResourceSlice{}
		}
		x.byNode[node][s.Name] = s
		if len(nodes) == 0 || nodes[0] != node {
			nodes = append(nodes, node)
		}
	}
	for _, n := range nodes {
		x.rebuild(n)
	}
	return nodes
}

// rebuild recomputes a node's devices from its slices.
func (x *Slices) rebuild(node string) {
	if old := x.nodes[node]; old != nil {
		for _, d := range old.byIndex {
			delete(x.leaves, deviceKey{d.Pool, d.Name})
		}
	}
	delete(x.nodes, node)
	slices := x.byNode[node]
	if len(slices) == 0 {
		delete(x.byNode, node)
		return
	}
	// Per pool: the newest generation, complete when all its slices are here.
	type pool struct {
		gen    int64
		count  int64
		slices []*resourceapi.ResourceSlice
	}
	pools := map[string]*pool{}
	for _, s := range slices {
		p := pools[s.Spec.Pool.Name]
		if p == nil {
			p = &pool{gen: s.Spec.Pool.Generation}
			pools[s.Spec.Pool.Name] = p
		}
		switch {
		case s.Spec.Pool.Generation > p.gen:
			p.gen, p.slices = s.Spec.Pool.Generation, nil
			fallthrough
		case s.Spec.Pool.Generation == p.gen:
			p.slices = append(p.slices, s)
			p.count = s.Spec.Pool.ResourceSliceCount
		}
	}
	nd := &nodeDevices{complete: true, byIndex: map[int32]Device{}}
	names := make([]string, 0, len(pools))
	for n := range pools {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, pn := range names {
		p := pools[pn]
		if int64(len(p.slices)) < p.count {
			nd.complete = false
		}
		sort.Slice(p.slices, func(i, j int) bool { return p.slices[i].Name < p.slices[j].Name })
		nd.slices = append(nd.slices, p.slices...)
		for _, s := range p.slices {
			for i := range s.Spec.Devices {
				d := &s.Spec.Devices[i]
				idx, ok := LeafIndex(d)
				if !ok {
					continue
				}
				if _, dup := nd.byIndex[idx]; dup {
					continue // the first pool (by name) wins
				}
				dev := Device{Pool: pn, Name: d.Name}
				for _, t := range d.Taints {
					if t.Effect == resourceapi.DeviceTaintEffectNoSchedule || t.Effect == resourceapi.DeviceTaintEffectNoExecute {
						dev.Tainted = t.Key + "=" + t.Value + ":" + string(t.Effect)
						break
					}
				}
				nd.byIndex[idx] = dev
				x.leaves[deviceKey{pn, d.Name}] = leafRef{node: node, index: idx}
			}
		}
	}
	x.nodes[node] = nd
}

// LeafIndex is the leaf cell index of a device: the number its name ends
// in, if its "type" attribute (where the driver sets one) is "gpu".
func LeafIndex(d *resourceapi.Device) (int32, bool) {
	if t, ok := d.Attributes["type"]; ok && t.StringValue != nil && *t.StringValue != "gpu" {
		return 0, false
	}
	name := d.Name
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	if i == len(name) {
		return 0, false
	}
	for j := 0; j < i; j++ {
		if name[j] >= '0' && name[j] <= '9' {
			return 0, false // gpu-0-mig-...: not a whole device
		}
	}
	n, err := strconv.ParseInt(name[i:], 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(n), true
}

// Device returns the device of a node's leaf cell.
func (x *Slices) Device(node string, index int32) (Device, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	nd := x.nodes[node]
	if nd == nil {
		return Device{}, false
	}
	d, ok := nd.byIndex[index]
	return d, ok
}

// Leaf returns the node and leaf index of a device of the driver.
func (x *Slices) Leaf(pool, device string) (node string, index int32, ok bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	r, ok := x.leaves[deviceKey{pool, device}]
	return r.node, r.index, ok
}

// HasDevices reports whether the node publishes devices of the driver, and
// whether all of its pools' newest slices are seen.
func (x *Slices) HasDevices(node string) (has, complete bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	nd := x.nodes[node]
	return nd != nil, nd != nil && nd.complete
}

// NodeSlices are the node's slices of the driver (the pools' newest
// generation): what the allocator reads.
func (x *Slices) NodeSlices(node string) []*resourceapi.ResourceSlice {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if nd := x.nodes[node]; nd != nil {
		return nd.slices
	}
	return nil
}

// NodeNames are the nodes with slices of the driver, sorted.
func (x *Slices) NodeNames() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]string, 0, len(x.nodes))
	for n := range x.nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Devices lists a node's leaf devices by index.
func (x *Slices) Devices(node string) map[int32]Device {
	x.mu.RLock()
	defer x.mu.RUnlock()
	nd := x.nodes[node]
	if nd == nil {
		return nil
	}
	out := make(map[int32]Device, len(nd.byIndex))
	for i, d := range nd.byIndex {
		out[i] = d
	}
	return out
}

// Health is what the node's slices say of its devices' health: a device
// tainted NoSchedule or NoExecute (NVIDIA: an XID error, a GPU lost) is bad.
func (x *Slices) Health(node string) []cellcore.DeviceStatus {
	x.mu.RLock()
	defer x.mu.RUnlock()
	nd := x.nodes[node]
	if nd == nil {
		return nil
	}
	var out []cellcore.DeviceStatus
	for i, d := range nd.byIndex {
		if d.Tainted != "" {
			out = append(out, cellcore.DeviceStatus{Index: i, Health: cellcore.DeviceBad})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out
}
