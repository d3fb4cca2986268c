package hivesched

import (
	"fmt"
	"math"
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

// AnnotationDeviceHealth on a Node lists its devices that are not good, for
// an operator or a node agent to set: "3,5" (devices 3 and 5 are bad), or
// with one of seed 003's (LAVA's) states, "3=bad,5=maintenance,6=looping";
// "T4/2=retired" names the leaf cell type on a node with several.
const AnnotationDeviceHealth = "hivesched.io/device-health"

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
	if s, ok := n.Annotations[AnnotationDeviceHealth]; ok {
		in.devices, bad = parseDeviceHealth(s)
	}
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

// foreignPod is a bound pod whose devices the core does not hold.
type foreignPod struct {
	node    string
	devices int32
}

// deviceInputs joins, per node, what the Node says of its devices and the
// devices that pods hivesched did not place hold, and hands both to the core
// whenever either changes.
type deviceInputs struct {
	mu      sync.Mutex
	nodes   map[string]nodeDeviceInput
	foreign map[types.UID]foreignPod
	names   map[types.UID]string // namespace/name of the foreign pods, for messages
	perNode map[string]int32
	// announced: foreign pods told (by an event) that they are counted.
	announced map[types.UID]bool
}

func newDeviceInputs() *deviceInputs {
	return &deviceInputs{nodes: map[string]nodeDeviceInput{}, foreign: map[types.UID]foreignPod{}, names: map[types.UID]string{},
		perNode: map[string]int32{}, announced: map[types.UID]bool{}}
}

// setNode records a node's input; it reports whether it changed.
func (d *deviceInputs) setNode(name string, in nodeDeviceInput) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	old, known := d.nodes[name]
	if known && old.unhealthy == in.unhealthy && equalDevices(old.devices, in.devices) {
		return false
	}
	d.nodes[name] = in
	return true
}

func equalDevices(a, b []cellcore.DeviceStatus) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// setForeign records (devices > 0) or forgets a pod's foreign devices; it
// returns the nodes whose count changed.
func (d *deviceInputs) setForeign(uid types.UID, name, node string, devices int32) (changed []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	old, had := d.foreign[uid]
	if had && old.node == node && old.devices == devices {
		return nil
	}
	if had {
		d.perNode[old.node] -= old.devices
		if d.perNode[old.node] <= 0 {
			delete(d.perNode, old.node)
		}
		delete(d.foreign, uid)
		delete(d.names, uid)
		changed = append(changed, old.node)
	}
	if devices > 0 && node != "" {
		d.foreign[uid] = foreignPod{node: node, devices: devices}
		d.names[uid] = name
		d.perNode[node] += devices
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
func (d *deviceInputs) announce(uid types.UID) bool {
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
func (d *deviceInputs) resetForeign() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	nodes := make([]string, 0, len(d.perNode))
	for n := range d.perNode {
		nodes = append(nodes, n)
	}
	d.foreign, d.names, d.perNode = map[types.UID]foreignPod{}, map[types.UID]string{}, map[string]int32{}
	return nodes
}

// coreInput is the core's view of one node.
func (d *deviceInputs) coreInput(name string) cellcore.NodeDevices {
	d.mu.Lock()
	defer d.mu.Unlock()
	in := d.nodes[name]
	return cellcore.NodeDevices{Devices: in.devices, Unhealthy: in.unhealthy, Foreign: min(d.perNode[name], math.MaxInt32)}
}

// ForeignPodsOn names (sorted, at most max) the foreign pods on the nodes.
func (d *deviceInputs) ForeignPodsOn(nodes []string, max int) (names []string, more int) {
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

// applyDevices hands a node's device input to the core.
func (p *HiveSched) applyDevices(logger klog.Logger, node string) {
	if err := p.core.SetNodeDevices(node, p.devices.coreInput(node)); err != nil {
		logger.Error(err, "node devices: some entries do not name a device of the node; the others count", "node", node)
	}
}

// onNodeDevices reads a node's device input (LAVA device health by name,
// unhealthy devices by count) and applies it if it changed.
func (p *HiveSched) onNodeDevices(logger klog.Logger, n *v1.Node) bool {
	in, bad := nodeDevices(n, p.resource)
	if len(bad) > 0 {
		msg := fmt.Sprintf("annotation %s: entries not understood, ignored: %s", AnnotationDeviceHealth, strings.Join(bad, "; "))
		logger.Error(nil, msg, "node", n.Name)
		p.event(n, v1.EventTypeWarning, "DeviceHealthInvalid", msg)
	}
	if !p.devices.setNode(n.Name, in) {
		return false
	}
	p.applyDevices(logger, n.Name)
	logger.V(2).Info("node devices", "node", n.Name, "devices", in.devices, "unhealthyUnnamed", in.unhealthy)
	return true
}

// terminal: the pod's containers have stopped for good; its devices are free.
func terminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// foreignDevices is how many devices a pod holds that the core does not
// count as a group's: a bound pod that is running (or starting, or
// terminating) and is not one of the core's pods (another scheduler's, one
// created with spec.nodeName, or one whose placement record is not
// trusted, or whose group the core could not take back).
func (p *HiveSched) foreignDevices(pod *v1.Pod, deleted bool) int32 {
	if deleted || pod.Spec.NodeName == "" || terminal(pod) {
		return 0
	}
	if _, known := p.core.NodeHealthOf(pod.Spec.NodeName); !known {
		return 0 // not a node of the physical cluster
	}
	n, err := podrequest.LeafRequest(pod, p.resource)
	if err != nil {
		n = math.MaxInt32 // beyond any node: every device of it counts
	}
	if n == 0 {
		return 0
	}
	// The core's own pods, cheapest check first: the group the pod was
	// tracked in (no record to decode), then its signed record.
	if g := p.groups.GroupOf(pod); g != "" && p.core.PodAssigned(g, podrequest.PodKey(pod)) {
		return 0
	}
	if rec, err := p.signer.Trusted(pod); err == nil && p.core.PodAssigned(rec.Group, podrequest.PodKey(pod)) {
		return 0
	}
	return int32(n)
}

// noteForeign keeps the foreign count of a pod's node up to date (once
// recovered: before that, the signing key may be unknown and every pod
// would look foreign; recovery counts them all). announce: events can be
// delivered now (not while recovering before the scheduler's event
// broadcaster runs: the informer's first delivery announces then).
func (p *HiveSched) noteForeign(logger klog.Logger, pod *v1.Pod, deleted, announce bool) {
	n := p.foreignDevices(pod, deleted)
	changed := p.devices.setForeign(pod.UID, pod.Namespace+"/"+pod.Name, pod.Spec.NodeName, n)
	for _, node := range changed {
		p.applyDevices(logger, node)
	}
	if len(changed) > 0 {
		p.vcs.Changed()
		if n == 0 {
			// Devices came free: the pods waiting for them may go.
			p.activateWaiting(logger, "")
		}
	}
	if n > 0 && announce && p.devices.announce(pod.UID) {
		logger.Info("a pod hivesched did not place holds devices: counted as taken", "pod", klog.KObj(pod), "node", pod.Spec.NodeName, "devices", n)
		p.event(pod, v1.EventTypeNormal, "ForeignDevicesCounted", fmt.Sprintf(
			"hivesched did not place this pod: its %d %s on node %s are counted as taken, and hivesched places nothing on them until the pod is gone",
			n, p.resource, pod.Spec.NodeName))
	}
}
