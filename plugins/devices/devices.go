// Package devices turns what Kubernetes says of nodes and devices into the
// cell core's hardware inputs: a node's health (an operator label, a
// cordon, the Ready condition), its devices' health (an annotation, and
// allocatable below capacity), and the devices that pods hivesched did not
// place hold (another scheduler's, or created with spec.nodeName): the core
// places nothing on any of them (docs/health.md).
package devices

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// LabelHealth lets an operator set a node's health beyond what Kubernetes
// reports, in seed 003's (LAVA's) terms: "maintenance", "retired", "bad",
// "looping" (being checked) or "unknown" ("good" or no label: Kubernetes'
// own view decides). docs/health.md maps every state. NodeRestriction lets
// a kubelet change its own Node's labels, this one included: the admission
// policy hivesched-node-verdicts (manifests/admission) refuses it that.
const LabelHealth = "hivesched.io/health"

// LabelHealthRestricted says the same as LabelHealth under the prefix that
// NodeRestriction keeps every kubelet from setting, changing or removing:
// an operator's verdict that holds without hivesched's admission policies.
// When both are set the worse one counts.
const LabelHealthRestricted = "node-restriction.kubernetes.io/hivesched-health"

// nodeVerdicts are the operator's node verdicts from least to most severe:
// of two labels, the later in this list counts.
var nodeVerdicts = []struct {
	label  string
	health cellcore.NodeHealth
}{
	{"unknown", cellcore.NodeUnknown},
	{"looping", cellcore.NodeLooping},
	{"bad", cellcore.NodeBad},
	{"maintenance", cellcore.NodeMaintenance},
	{"retired", cellcore.NodeRetired},
}

// operatorVerdict is the worse of the node's two operator labels; ok is
// false when neither names a state other than good.
func operatorVerdict(n *v1.Node) (cellcore.NodeHealth, bool) {
	worst := -1
	for _, key := range []string{LabelHealth, LabelHealthRestricted} {
		v, set := n.Labels[key]
		if !set {
			continue
		}
		for i, nv := range nodeVerdicts {
			if nv.label == v && i > worst {
				worst = i
			}
		}
	}
	if worst < 0 {
		return 0, false
	}
	return nodeVerdicts[worst].health, true
}

// NodeHealth maps a Node to the core's hardware health: the operator's
// labels first, then cordon (Maintenance), then the Ready condition.
func NodeHealth(n *v1.Node) cellcore.NodeHealth {
	if h, ok := operatorVerdict(n); ok {
		return h
	}
	if n.Spec.Unschedulable {
		return cellcore.NodeMaintenance
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			if c.Status == v1.ConditionTrue {
				return cellcore.NodeHealthy
			}
			return cellcore.NodeBad
		}
	}
	return cellcore.NodeUnknown
}

// AnnotationDeviceHealth on a Node lists its devices that are not good, for
// an operator or a node agent to set: "3,5" (devices 3 and 5 are bad), or
// with one of seed 003's (LAVA's) states, "3=bad,5=maintenance,6=looping";
// "T4/2=retired" names the leaf cell type on a node with several.
// It is the operator's: the admission policy hivesched-node-verdicts keeps
// a node's own credentials from changing it.
const AnnotationDeviceHealth = "hivesched.io/device-health"

// AnnotationNodeDeviceHealth is the same list as reported from the node
// itself (a node agent, or anything holding the kubelet's credentials):
// it can only make a device worse. Each device counts at the worse of the
// two annotations' states, so a compromised node can take its own devices
// out of service but never return one the operator took out.
const AnnotationNodeDeviceHealth = "node.hivesched.io/device-health"

// parseDeviceHealth reads the annotation. Entries that do not parse are
// returned as errors; the others still count.
func parseDeviceHealth(s string) ([]cellcore.DeviceStatus, []string) {
	var out []cellcore.DeviceStatus
	var bad []string
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		dev, state, hasState := strings.Cut(e, "=")
		h := cellcore.DeviceBad
		if hasState {
			var ok bool
			if h, ok = cellcore.ParseDeviceHealth(strings.ToLower(strings.TrimSpace(state))); !ok {
				bad = append(bad, fmt.Sprintf("%q: unknown state %q (good, unknown, looping, bad, maintenance, retired)", e, state))
				continue
			}
		}
		leafType, idx, typed := strings.Cut(strings.TrimSpace(dev), "/")
		if !typed {
			leafType, idx = "", leafType
		}
		i, err := strconv.ParseInt(idx, 10, 32)
		if err != nil || i < 0 {
			bad = append(bad, fmt.Sprintf("%q: a device index is a whole number from 0", e))
			continue
		}
		if h != cellcore.DeviceGood {
			out = append(out, cellcore.DeviceStatus{LeafCellType: leafType, Index: int32(i), Health: h})
		}
	}
	return out, bad
}

// nodeDeviceInput is what a Node object says of its devices.
type nodeDeviceInput struct {
	devices []cellcore.DeviceStatus
	// unhealthy: allocatable below capacity, beyond the named devices that
	// are not good (a device plugin withdraws a failed device from
	// allocatable; an operator may name it too).
	unhealthy int32
}

func nodeDevices(n *v1.Node, resource v1.ResourceName) (nodeDeviceInput, []string) {
	var in nodeDeviceInput
	var bad []string
	for _, key := range []string{AnnotationDeviceHealth, AnnotationNodeDeviceHealth} {
		s, ok := n.Annotations[key]
		if !ok {
			continue
		}
		devs, wrong := parseDeviceHealth(s)
		for _, w := range wrong {
			bad = append(bad, key+" "+w)
		}
		in.devices = append(in.devices, devs...)
	}
	in.devices = worstPerDevice(in.devices)
	capQ, okC := n.Status.Capacity[resource]
	allocQ, okA := n.Status.Allocatable[resource]
	if okC && okA {
		missing := capQ.Value() - allocQ.Value()
		if missing > 0 {
			missing -= int64(len(in.devices))
			in.unhealthy = int32(min(max(missing, 0), math.MaxInt32))
		}
	}
	return in, bad
}

// worstPerDevice keeps, of the entries that name one device, the worst
// state, and orders the entries from the best state to the worst: the core
// applies them in order, so that where an untyped entry ("3") and a typed
// one ("V100/3") name the same device the worse still counts.
func worstPerDevice(devs []cellcore.DeviceStatus) []cellcore.DeviceStatus {
	if len(devs) < 2 {
		return devs
	}
	type key struct {
		leafType string
		index    int32
	}
	at := make(map[key]int, len(devs))
	out := devs[:0:0]
	for _, d := range devs {
		k := key{d.LeafCellType, d.Index}
		if i, seen := at[k]; seen {
			out[i].Health = max(out[i].Health, d.Health)
			continue
		}
		at[k] = len(out)
		out = append(out, d)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Health < out[j].Health })
	return out
}

// foreignPod is a bound pod whose devices the core does not hold.
type foreignPod struct {
	node    string
	devices int32
	indices []int32
}

// inputs joins, per node, what the Node says of its devices and the
// devices that pods hivesched did not place hold.
type inputs struct {
	mu      sync.Mutex
	nodes   map[string]nodeDeviceInput
	foreign map[types.UID]foreignPod
	names   map[types.UID]string // namespace/name of the foreign pods, for messages
	// perNode sums the foreign devices per node in int64: a pod counted
	// as every device of its node (MaxInt32) beside another must not wrap
	// the sum negative (issue 28, finding 11); the core caps it at the
	// node's leaves.
	perNode map[string]int64
	// named: per node, the devices foreign pods name (Taken.Indices), and
	// how many pods name each.
	named map[string]map[int32]int
	// announced: foreign pods told (by an event) that they are counted.
	announced map[types.UID]bool
	// claimed: per node, the devices device claims (DRA) hold; slices:
	// what the node's ResourceSlices say of its devices' health.
	claimed map[string][]cellcore.DeviceRef
	slices  map[string][]cellcore.DeviceStatus
}

func newInputs() *inputs {
	return &inputs{nodes: map[string]nodeDeviceInput{}, foreign: map[types.UID]foreignPod{}, names: map[types.UID]string{},
		perNode: map[string]int64{}, named: map[string]map[int32]int{}, announced: map[types.UID]bool{}, claimed: map[string][]cellcore.DeviceRef{}, slices: map[string][]cellcore.DeviceStatus{}}
}

// setNode records a node's input; it reports whether it changed.
func (d *inputs) setNode(name string, in nodeDeviceInput) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	old, known := d.nodes[name]
	if known && old.unhealthy == in.unhealthy && slices.Equal(old.devices, in.devices) {
		return false
	}
	d.nodes[name] = in
	return true
}

// setForeign records (taken) or forgets (nothing taken) a pod's foreign
// devices; it returns the nodes whose input changed.
func (d *inputs) setForeign(uid types.UID, name, node string, taken Taken) (changed []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	devices := max(taken.Devices, 0)
	old, had := d.foreign[uid]
	if had && old.node == node && old.devices == devices && slices.Equal(old.indices, taken.Indices) {
		return nil
	}
	if had {
		d.perNode[old.node] -= int64(old.devices)
		if d.perNode[old.node] <= 0 {
			delete(d.perNode, old.node)
		}
		if m := d.named[old.node]; m != nil {
			for _, i := range old.indices {
				if m[i]--; m[i] <= 0 {
					delete(m, i)
				}
			}
			if len(m) == 0 {
				delete(d.named, old.node)
			}
		}
		delete(d.foreign, uid)
		delete(d.names, uid)
		changed = append(changed, old.node)
	}
	if !taken.None() && node != "" {
		indices := slices.Clone(taken.Indices)
		d.foreign[uid] = foreignPod{node: node, devices: devices, indices: indices}
		d.names[uid] = name
		if devices > 0 {
			d.perNode[node] += int64(devices)
		}
		if len(indices) > 0 {
			m := d.named[node]
			if m == nil {
				m = map[int32]int{}
				d.named[node] = m
			}
			for _, i := range indices {
				m[i]++
			}
		}
		if !had || old.node != node {
			changed = append(changed, node)
		}
	} else {
		delete(d.announced, uid)
	}
	return changed
}

// announce reports whether a foreign pod is to hear that it is counted: once
// per pod and process.
func (d *inputs) announce(uid types.UID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, counted := d.foreign[uid]; !counted || d.announced[uid] {
		return false
	}
	d.announced[uid] = true
	return true
}

// resetForeign forgets every foreign pod (recovery counts them afresh) and
// returns the nodes that had some.
func (d *inputs) resetForeign() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	nodes := make([]string, 0, len(d.perNode))
	for n := range d.perNode {
		nodes = append(nodes, n)
	}
	for n := range d.named {
		if _, counted := d.perNode[n]; !counted {
			nodes = append(nodes, n)
		}
	}
	d.foreign, d.names, d.perNode, d.named = map[types.UID]foreignPod{}, map[types.UID]string{}, map[string]int64{}, map[string]map[int32]int{}
	return nodes
}

// coreInput is the core's view of one node.
func (d *inputs) coreInput(name string) cellcore.NodeDevices {
	d.mu.Lock()
	defer d.mu.Unlock()
	in := d.nodes[name]
	devs := in.devices
	if extra := d.slices[name]; len(extra) > 0 {
		// The node's annotation names a device's state first; its slices
		// add the devices it does not name.
		devs = append([]cellcore.DeviceStatus(nil), devs...)
		for _, e := range extra {
			named := false
			for _, x := range in.devices {
				named = named || x.Index == e.Index && (x.LeafCellType == "" || e.LeafCellType == "" || x.LeafCellType == e.LeafCellType)
			}
			if !named {
				devs = append(devs, e)
			}
		}
	}
	return cellcore.NodeDevices{Devices: devs, Unhealthy: in.unhealthy, Foreign: int32(min(d.perNode[name], math.MaxInt32)), Claimed: d.claimedLocked(name)}
}

// claimedLocked is the node's devices taken by name: those device claims
// hold (DRA), and those foreign pods name. d.mu is held.
func (d *inputs) claimedLocked(node string) []cellcore.DeviceRef {
	named := d.named[node]
	if len(named) == 0 {
		return d.claimed[node]
	}
	out := slices.Clone(d.claimed[node])
	for i := range named {
		if !slices.ContainsFunc(out, func(r cellcore.DeviceRef) bool { return r.Index == i }) {
			out = append(out, cellcore.DeviceRef{Index: i})
		}
	}
	slices.SortFunc(out, func(a, b cellcore.DeviceRef) int {
		if a.Index != b.Index {
			return int(a.Index) - int(b.Index)
		}
		return strings.Compare(a.LeafCellType, b.LeafCellType)
	})
	return out
}

// foreignPodsOn names (sorted, at most max) the foreign pods on the nodes.
func (d *inputs) foreignPodsOn(nodes []string, max int) (names []string, more int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	in := map[string]bool{}
	for _, n := range nodes {
		in[n] = true
	}
	for uid, fp := range d.foreign {
		if in[fp.node] {
			names = append(names, d.names[uid])
		}
	}
	sort.Strings(names)
	if len(names) > max {
		more = len(names) - max
		names = names[:max]
	}
	return names, more
}

// Tracker hands the core, per node, what the Node says of its devices and
// the devices that pods hivesched did not place hold, whenever either
// changes.
type Tracker struct {
	core     *cellcore.Core
	resource v1.ResourceName // a pod's devices are its request of it
	inputs   *inputs
}

// New tracks the devices of resource for core.
func New(core *cellcore.Core, resource v1.ResourceName) *Tracker {
	return &Tracker{core: core, resource: resource, inputs: newInputs()}
}

// apply hands a node's device input to the core.
func (t *Tracker) apply(logger klog.Logger, node string) {
	if err := t.core.SetNodeDevices(node, t.inputs.coreInput(node)); err != nil {
		logger.Error(err, "node devices: some entries do not name a device of the node; the others count", "node", node)
	}
}

// Node reads a node's device input (LAVA device health by name, unhealthy
// devices by count) and applies it if it changed; invalid says which
// entries of its annotation were not understood ("" if none).
func (t *Tracker) Node(logger klog.Logger, n *v1.Node) (changed bool, invalid string) {
	in, bad := nodeDevices(n, t.resource)
	if len(bad) > 0 {
		invalid = "device health annotations: entries not understood, ignored: " + strings.Join(bad, "; ")
		logger.Error(nil, invalid, "node", n.Name)
	}
	if !t.inputs.setNode(n.Name, in) {
		return false, invalid
	}
	t.apply(logger, n.Name)
	logger.V(2).Info("node devices", "node", n.Name, "devices", in.devices, "unhealthyUnnamed", in.unhealthy)
	return true, invalid
}

// terminal: the pod's containers have stopped for good; its devices are free.
func terminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// Foreign is what a pod holds that the core does not count as a group's: a
// bound pod that is running (or starting, or terminating) on a node of the
// physical cluster and that held does not say is one of the core's pods
// (another scheduler's, one created with spec.nodeName, one whose placement
// record is not trusted, or whose group the core could not take back). It
// takes as many devices as it requests of the leaf resource; one that
// requests none but names devices (references.go) takes those devices of
// its node. Event-handler work: the checks before held and the parse are
// map look-ups.
func (t *Tracker) Foreign(pod *v1.Pod, deleted bool, held func(*v1.Pod) bool) Taken {
	if deleted || pod.Spec.NodeName == "" || terminal(pod) {
		return Taken{}
	}
	if _, known := t.core.NodeHealthOf(pod.Spec.NodeName); !known {
		return Taken{} // not a node of the physical cluster
	}
	if pod.Status.ExtendedResourceClaimStatus != nil {
		// DynamicResources allocated its request of the resource as
		// devices of a ResourceClaim (a DeviceClass maps the resource):
		// the claim names them, and counts them (NodeDevices.Claimed).
		return Taken{}
	}
	n, err := podrequest.LeafRequest(pod, t.resource)
	if err != nil {
		n = math.MaxInt32 // beyond any node: every device of it counts
	}
	if n > 0 {
		if held(pod) {
			return Taken{}
		}
		return Taken{Devices: int32(n)}
	}
	if !referencesDevices(pod) || held(pod) {
		return Taken{}
	}
	idx, via, ignored := referencedIndices(pod, t.core.NodeDeviceIndices(pod.Spec.NodeName))
	return Taken{Indices: idx, Via: via, Ignored: ignored}
}

// Count records what the pod takes (nothing: none, or it is gone) and
// hands the nodes whose input changed to the core; it reports whether any
// did.
func (t *Tracker) Count(logger klog.Logger, pod *v1.Pod, taken Taken) bool {
	changed := t.inputs.setForeign(pod.UID, pod.Namespace+"/"+pod.Name, pod.Spec.NodeName, taken)
	for _, node := range changed {
		t.apply(logger, node)
	}
	return len(changed) > 0
}

// Announce reports whether a pod counted as foreign is to hear that it is:
// once per pod and process.
func (t *Tracker) Announce(uid types.UID) bool { return t.inputs.announce(uid) }

// ResetForeign forgets every foreign pod (recovery counts them afresh) and
// hands the nodes that had some to the core.
func (t *Tracker) ResetForeign(logger klog.Logger) {
	for _, node := range t.inputs.resetForeign() {
		t.apply(logger, node)
	}
}

// ForeignPodsOn names (sorted, at most max) the foreign pods on the nodes.
func (t *Tracker) ForeignPodsOn(nodes []string, max int) (names []string, more int) {
	return t.inputs.foreignPodsOn(nodes, max)
}

// SetClaimed records the devices of a node that device claims (DRA
// ResourceClaims) hold, and applies them if they changed; it reports
// whether they did. A claimed device no group of the core holds is taken.
func (t *Tracker) SetClaimed(logger klog.Logger, node string, refs []cellcore.DeviceRef) bool {
	return setInput(t, logger, node, t.inputs.claimed, refs, slices.Equal[[]cellcore.DeviceRef])
}

// SetSliceHealth records what a node's ResourceSlices say of its devices
// (a device tainted NoSchedule or NoExecute is bad), and applies it if it
// changed; it reports whether it did. The node's annotation, where it names
// a device, says more.
func (t *Tracker) SetSliceHealth(logger klog.Logger, node string, devs []cellcore.DeviceStatus) bool {
	return setInput(t, logger, node, t.inputs.slices, devs, slices.Equal[[]cellcore.DeviceStatus])
}

// setInput records one DRA input of a known node in inputs (under the
// inputs' lock; none is kept for an empty one) and applies the node's
// devices if it changed; it reports whether it did.
func setInput[T any](t *Tracker, logger klog.Logger, node string, inputs map[string][]T, v []T, equal func(a, b []T) bool) bool {
	if _, known := t.core.NodeHealthOf(node); !known {
		return false
	}
	t.inputs.mu.Lock()
	same := equal(inputs[node], v)
	if !same {
		if len(v) == 0 {
			delete(inputs, node)
		} else {
			inputs[node] = v
		}
	}
	t.inputs.mu.Unlock()
	if same {
		return false
	}
	t.apply(logger, node)
	return true
}
