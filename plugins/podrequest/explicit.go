package podrequest

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
)

// The explicit form (docs/affinitygroups.md): a user creates an
// AffinityGroup and its pods carry only label hivesched.io/affinity-group
// and their leaf cell request; the group's request is the object's spec.

// explicitAG is the user-created AffinityGroup the pod's group label names,
// or nil.
func (r *Resolver) explicitAG(pod *v1.Pod) *hv1.AffinityGroup {
	name, ok := pod.Labels[LabelAffinityGroup]
	if !ok || name == "" || r.lookups.AffinityGroups == nil {
		return nil
	}
	ag, err := r.lookups.AffinityGroups.AffinityGroups(pod.Namespace).Get(name)
	if err != nil || ag.Labels[hv1.LabelManagedBy] == hv1.ManagedByHivesched || ag.DeletionTimestamp != nil {
		return nil
	}
	return ag
}

// FromAffinityGroup is a pod's request in the explicit form: the group is the
// AffinityGroup's spec, the pod's own size its leaf cell request (one of
// the members' sizes). The pod's own hivesched annotations are not read;
// a virtual-cluster label, if any, must agree, and so must a topology
// annotation (within.go: Kueue's job templates carry one).
func FromAffinityGroup(pod *v1.Pod, ag *hv1.AffinityGroup, res v1.ResourceName) (*Request, error) {
	leaves, err := LeafRequest(pod, res)
	if err != nil {
		return nil, err
	}
	if vc, ok := pod.Labels[LabelVirtualCluster]; ok && vc != ag.Spec.VirtualCluster {
		return nil, fmt.Errorf("pod's label %s=%q disagrees with its AffinityGroup %s/%s (virtualCluster %q): drop the label or make them agree",
			LabelVirtualCluster, vc, ag.Namespace, ag.Name, ag.Spec.VirtualCluster)
	}
	if ag.Spec.VirtualCluster == "" || len(ag.Spec.Members) == 0 {
		return nil, fmt.Errorf("AffinityGroup %s/%s needs spec.virtualCluster and spec.members", ag.Namespace, ag.Name)
	}
	r := &Request{LeafCellNumber: int32(leaves)}
	g := &r.Group
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
	g.WithinTopologyKey = ag.Spec.WithinTopologyKey
	if err := agreesWithin(pod, ag); err != nil {
		return nil, err
	}
	for _, m := range ag.Spec.Members {
		if m.PodNumber <= 0 || m.LeafCellNumber < 0 || int64(r.CellLessPods)+int64(m.PodNumber) > cellcore.MaxPodsPerGroup {
			return nil, fmt.Errorf("AffinityGroup %s/%s: members need a positive podNumber and a leafCellNumber of 0 (members without GPUs) or more", ag.Namespace, ag.Name)
		}
		if m.LeafCellNumber == 0 {
			r.CellLessPods += m.PodNumber
			continue
		}
		g.Members = append(g.Members, cellcore.AffinityGroupMember{PodNumber: m.PodNumber, LeafCellNumber: m.LeafCellNumber})
	}
	if leaves == 0 && r.CellLessPods == 0 {
		return nil, fmt.Errorf("pod belongs to AffinityGroup %s/%s but requests no %s: request the leaf cells (GPUs) of one of its members, or give the group a member of leafCellNumber 0", ag.Namespace, ag.Name, res)
	}
	if err := checkRequest(r); err != nil {
		return nil, err
	}
	return r, nil
}

// agreesWithin: the spec's withinTopologyKey is the group's constraint; a
// pod annotation that asks for another one (or for one the spec does not
// have) is refused rather than dropped or followed.
func agreesWithin(pod *v1.Pod, ag *hv1.AffinityGroup) error {
	key, from, err := withinTopology(pod)
	if err != nil || key == "" || key == ag.Spec.WithinTopologyKey {
		return err
	}
	if ag.Spec.WithinTopologyKey == "" {
		return fmt.Errorf("pod's annotation %s=%q asks to keep the gang inside one %s cell, but its AffinityGroup %s/%s has no spec.withinTopologyKey, and its spec is the group's request: set spec.withinTopologyKey: %q on the AffinityGroup, or drop the annotation",
			from, key, key, ag.Namespace, ag.Name, key)
	}
	return fmt.Errorf("pod's annotation %s=%q disagrees with its AffinityGroup %s/%s (withinTopologyKey %q), whose spec is the group's request: drop the annotation or make them agree",
		from, key, ag.Namespace, ag.Name, ag.Spec.WithinTopologyKey)
}
