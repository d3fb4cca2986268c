package hivesched

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
)

// The explicit form (docs/affinitygroups.md): a user creates an
// AffinityGroup and its pods carry only label hivesched.io/affinity-group
// and their leaf cell request; the group's request is the object's spec.
// Lookups read the informer's cache, never the API server: they run where
// a pod's request is parsed (PreEnqueue, QueueSort, PreFilter).

// groupResolver returns a pod's request from an object that describes its
// group (an explicit AffinityGroup), or handled false when none does and
// the pod's own labels and annotations are its request.
type groupResolver func(pod *v1.Pod, res v1.ResourceName) (req *podRequest, err error, handled bool)

// explicitAG is the user-created AffinityGroup the pod's group label names,
// or nil.
func (p *HiveSched) explicitAG(pod *v1.Pod) *hv1.AffinityGroup {
	name, ok := pod.Labels[LabelAffinityGroup]
	if !ok || name == "" || p.agLister == nil {
		return nil
	}
	ag, err := p.agLister.AffinityGroups(pod.Namespace).Get(name)
	if err != nil || ag.Labels[hv1.LabelManagedBy] == hv1.ManagedByHivesched || ag.DeletionTimestamp != nil {
		return nil
	}
	return ag
}

// resolveGroup is the plugin's groupResolver.
func (p *HiveSched) resolveGroup(pod *v1.Pod, res v1.ResourceName) (*podRequest, error, bool) {
	if req, err, ok := p.requestFromWorkload(pod, res); ok {
		return req, err, true
	}
	if _, hived := pod.Annotations[HivedSpecAnnotation]; hived {
		return nil, nil, false
	}
	if ag := p.explicitAG(pod); ag != nil {
		req, err := requestFromAG(pod, ag, res)
		return req, err, true
	}
	return p.requestFromPodGroup(pod, res)
}

// requestFromAG is a pod's request in the explicit form: the group is the
// AffinityGroup's spec, the pod's own size its leaf cell request (one of
// the members' sizes). The pod's own hivesched annotations are not read;
// a virtual-cluster label, if any, must agree.
func requestFromAG(pod *v1.Pod, ag *hv1.AffinityGroup, res v1.ResourceName) (*podRequest, error) {
	leaves, err := leafRequest(pod, res)
	if err != nil {
		return nil, err
	}
	if leaves <= 0 {
		return nil, fmt.Errorf("pod belongs to AffinityGroup %s/%s but requests no %s: request the leaf cells (GPUs) of one of its members", ag.Namespace, ag.Name, res)
	}
	if vc, ok := pod.Labels[LabelVirtualCluster]; ok && vc != ag.Spec.VirtualCluster {
		return nil, fmt.Errorf("pod's label %s=%q disagrees with its AffinityGroup %s/%s (virtualCluster %q): drop the label or make them agree",
			LabelVirtualCluster, vc, ag.Namespace, ag.Name, ag.Spec.VirtualCluster)
	}
	if ag.Spec.VirtualCluster == "" || len(ag.Spec.Members) == 0 {
		return nil, fmt.Errorf("AffinityGroup %s/%s needs spec.virtualCluster and spec.members", ag.Namespace, ag.Name)
	}
	r := &podRequest{leafCellNumber: int32(leaves)}
	g := &r.group
	g.Name = pod.Namespace + "/" + ag.Name
	g.Namespace = pod.Namespace
	g.SpreadKey = pod.Labels[LabelSpreadKey]
	g.VirtualCluster = ag.Spec.VirtualCluster
	if ag.Spec.Priority != nil {
		g.Priority = *ag.Spec.Priority
	}
	g.LeafCellType = ag.Spec.LeafCellType
	g.PinnedCellID = ag.Spec.PinnedCell
	g.LazyPreemptionEnable = ag.Spec.LazyPreemption
	for _, m := range ag.Spec.Members {
		if m.PodNumber <= 0 || m.LeafCellNumber <= 0 {
			return nil, fmt.Errorf("AffinityGroup %s/%s: members need positive podNumber and leafCellNumber", ag.Namespace, ag.Name)
		}
		g.Members = append(g.Members, cellcore.AffinityGroupMember{PodNumber: m.PodNumber, LeafCellNumber: m.LeafCellNumber})
	}
	if err := checkRequest(r); err != nil {
		return nil, err
	}
	return r, nil
}

// parse reads a pod's request as the index does, without caching it.
func (p *HiveSched) parse(pod *v1.Pod) (*podRequest, error) {
	if req, err, ok := p.resolveGroup(pod, p.resource); ok {
		return req, err
	}
	return parsePod(pod, p.resource)
}

// groupObjectChanged re-reads the requests of the unbound pods an
// AffinityGroup (or PodGroup) describes whose request was refused before
// (they came before the object did) and sends them back to the active
// queue. Called by the informers' handlers.
func (p *HiveSched) groupObjectChanged(logger klog.Logger, namespace string, selector labels.Selector) {
	p.rereadRefused(logger, namespace, func(pod *v1.Pod) bool { return selector.Matches(labels.Set(pod.Labels)) })
}

// rereadRefused re-reads the refused requests of the namespace's unbound
// pods that match and sends them back to the active queue.
func (p *HiveSched) rereadRefused(logger klog.Logger, namespace string, match func(*v1.Pod) bool) {
	lister := p.handle.SharedInformerFactory().Core().V1().Pods().Lister()
	pods, err := lister.Pods(namespace).List(labels.Everything())
	if err != nil || len(pods) == 0 {
		return
	}
	activate := map[string]*v1.Pod{}
	for _, pod := range pods {
		if pod.Spec.NodeName != "" || !match(pod) || !p.groups.forgetRefused(pod) {
			continue
		}
		p.groups.track(pod, p.resource) // read again, and counted for the gang gate
		activate[pod.Namespace+"/"+pod.Name] = pod
	}
	if len(activate) > 0 {
		p.handle.Activate(logger, activate)
	}
}
