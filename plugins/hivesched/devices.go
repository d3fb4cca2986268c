package hivesched

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/plugins/internal/english"
	"github.com/hivesched/hivesched/plugins/metrics"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// nodeDevices hands a node's device input to the core (devices.Tracker)
// and reports whether it changed; entries of its annotation that do not
// parse are evented on the node.
func (p *HiveSched) nodeDevices(logger klog.Logger, n *v1.Node) bool {
	changed, invalid := p.devices.Node(logger, n)
	if invalid != "" {
		p.event(n, v1.EventTypeWarning, "DeviceHealthInvalid", invalid)
	}
	return changed
}

// coreHolds reports whether the pod is one of the core's pods, cheapest
// check first: the group the pod was tracked in (no record to decode),
// then its signed record.
func (p *HiveSched) coreHolds(pod *v1.Pod) bool {
	if g := p.groups.GroupOf(pod); g != "" && p.core.PodAssigned(g, podrequest.PodKey(pod)) {
		return true
	}
	rec, err := p.signer.Trusted(pod)
	return err == nil && p.core.PodAssigned(rec.Group, podrequest.PodKey(pod))
}

// noteForeign keeps the foreign count of a pod's node up to date (once
// recovered: before that, the signing key may be unknown and every pod
// would look foreign; recovery counts them all). announce: events can be
// delivered now (not while recovering before the scheduler's event
// broadcaster runs: the informer's first delivery announces then).
func (p *HiveSched) noteForeign(logger klog.Logger, pod *v1.Pod, deleted, announce bool) {
	taken := p.devices.Foreign(pod, deleted, p.coreHolds)
	if p.devices.Count(logger, pod, taken) {
		p.vcs.Changed()
		if taken.None() {
			// Devices came free: the pods waiting for them may go.
			p.activateWaiting(logger, "")
		}
	}
	if taken.None() || !announce || !p.devices.Announce(pod.UID) {
		return
	}
	if len(taken.Indices) == 0 {
		metrics.ForeignPodCounted("requested")
		logger.Info("a pod hivesched did not place holds devices: counted as taken", "pod", klog.KObj(pod), "node", pod.Spec.NodeName, "devices", taken.Devices)
		p.event(pod, v1.EventTypeNormal, "ForeignDevicesCounted", fmt.Sprintf(
			"hivesched did not place this pod: its %d %s on node %s are counted as taken, and hivesched places nothing on them until the pod is gone",
			taken.Devices, p.resource, pod.Spec.NodeName))
		return
	}
	// It requests none of the resource but names devices (issue 28,
	// finding 3): a Warning, as it runs on devices nothing gave it.
	metrics.ForeignPodCounted("referenced")
	devs := make([]string, len(taken.Indices))
	for i, x := range taken.Indices {
		devs[i] = strconv.Itoa(int(x))
	}
	ignored := ""
	if taken.Ignored > 0 {
		ignored = fmt.Sprintf(" (%d entries that name no device of the node ignored)", taken.Ignored)
	}
	logger.Info("a pod hivesched did not place names devices without requesting them: counted as taken", "pod", klog.KObj(pod), "node", pod.Spec.NodeName,
		"devices", taken.Indices, "annotations", taken.Via, "ignored", taken.Ignored)
	p.event(pod, v1.EventTypeWarning, "ForeignDevicesCounted", fmt.Sprintf(
		"hivesched did not place this pod, which requests no %s but names devices %s of node %s in %s%s: they are counted as taken, and hivesched places nothing on them until the pod is gone",
		p.resource, strings.Join(devs, ","), pod.Spec.NodeName, english.JoinNames(taken.Via), ignored))
}
