package hivesched

import (
	"context"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// The framework's event recorder resolves an object's kind from client-go's
// scheme (kube-scheduler builds every profile's recorder on it). Without
// hivesched.io there, an event on a VirtualCluster or an AffinityGroup is
// dropped with "no kind is registered": a Rejected VC said so only in its
// status condition and the log.
func init() {
	utilruntime.Must(hv1.AddToScheme(clientgoscheme.Scheme))
}

// EventsToRegister: deleted pods free cells (and complete gangs' victims),
// added pods complete gangs waiting at PreEnqueue, node changes change health.
func (p *HiveSched) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: p.hintPodDeleted},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add}, QueueingHintFn: p.hintPodAdded},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeCondition | fwk.UpdateNodeTaint | fwk.UpdateNodeLabel}},
		// GPU claims: a pod waits for its claims to exist, and for a
		// stale allocation of them to be released; slices name devices.
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update | fwk.Delete}, QueueingHintFn: p.hintClaim},
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.UpdatePodGeneratedResourceClaim}},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update}},
	}, nil
}

// hintClaim queues a pod when one of its own claims changed.
func (p *HiveSched) hintClaim(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	c, ok := newObj.(*resourceapi.ResourceClaim)
	if !ok {
		if c, ok = oldObj.(*resourceapi.ResourceClaim); !ok {
			return fwk.Queue, nil
		}
	}
	if c.Namespace != pod.Namespace {
		return fwk.QueueSkip, nil
	}
	if metav1.IsControlledBy(c, pod) {
		return fwk.Queue, nil // generated for it (its status may not name it yet)
	}
	for i := range pod.Spec.ResourceClaims {
		if name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i]); err == nil && name != nil && *name == c.Name {
			return fwk.Queue, nil
		}
	}
	return fwk.QueueSkip, nil
}

func (p *HiveSched) hintPodDeleted(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	deleted, ok := oldObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, nil
	}
	if p.recovery.Done() && p.groups.GroupOf(deleted) != "" {
		// Our pod informer's handler has not processed the deletion yet:
		// the core still holds its cells. Requeueing now would let the
		// pods popped before the release fail and the one popped after it
		// win, whatever the queue's order (the VC's sequencer). The
		// handler releases the cells, then activates every waiting pod
		// at once (onPod, activateWaiting), so the order decides.
		return fwk.QueueSkip, nil
	}
	// Not a member of a group hivesched holds. This hint runs under the
	// scheduling queue's lock, once per waiting pod: cheap checks only,
	// never a parse of the deleted pod's request. A bound pod that may
	// have asked for cells (a foreign GPU pod, one whose record was
	// refused) frees devices the core counted as taken.
	if deleted.Spec.NodeName != "" && podrequest.MayAsk(deleted, p.resource) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

func (p *HiveSched) hintPodAdded(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	added, ok := newObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, nil
	}
	if g := p.groups.GroupOf(added); g != "" && g == p.groups.GroupOf(pod) {
		return fwk.Queue, nil // one more member of the pod's gang
	}
	return fwk.QueueSkip, nil
}

// activate moves the pending pods of the named groups back to the active queue.
func (p *HiveSched) activate(logger klog.Logger, groups []string) {
	pods := map[string]*v1.Pod{}
	for _, g := range groups {
		for _, pod := range p.groups.Pods(g) {
			if pod.Spec.NodeName == "" {
				pods[pod.Namespace+"/"+pod.Name] = pod
			}
		}
	}
	if len(pods) > 0 {
		p.handle.Activate(logger, pods)
	}
}

// activateWaiting requeues the unbound pods of a VC's groups and of every
// opportunistic group (they may use any free cell); with vc "", of all groups.
func (p *HiveSched) activateWaiting(logger klog.Logger, vc string) {
	pods := p.groups.UnboundPods(func(req *podrequest.Request) bool {
		return vc == "" || req.Group.VirtualCluster == vc || req.Group.Priority < 0
	})
	if len(pods) > 0 {
		p.handle.Activate(logger, pods)
	}
}
