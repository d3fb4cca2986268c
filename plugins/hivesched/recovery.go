package hivesched

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// recover rebuilds the core before the first scheduling cycle (the seed's
// ec): node health, the VCs, then every running group from its bound pods'
// persisted placements. Only Allocated groups are rebuilt; Pending and
// Preempting ones were not persisted and are simply scheduled again.
func (p *HiveSched) recover(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	cs := p.handle.ClientSet()
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	for i := range nodes.Items {
		_ = p.core.SetNodeHealth(nodes.Items[i].Name, nodeHealth(&nodes.Items[i]))
	}
	vcs, err := p.vcClient.HiveschedV1alpha1().VirtualClusters().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing virtual clusters (is the CRD installed?): %w", err)
	}
	for i := range vcs.Items {
		p.applyVC(logger, &vcs.Items[i])
	}
	pods, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	type member struct {
		pod *v1.Pod
		rec placementRecord
	}
	groups := map[string][]member{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		raw, ok := pod.Annotations[AnnotationPlacement]
		if !ok || pod.Spec.NodeName == "" || !p.ours(pod) || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed || pod.DeletionTimestamp != nil {
			continue
		}
		rec, err := decodePlacement(raw)
		if err != nil {
			logger.Error(err, "cannot recover a pod's placement", "pod", klog.KObj(pod))
			continue
		}
		groups[rec.Group] = append(groups[rec.Group], member{pod, rec})
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	// Higher priority first, so that if anything no longer fits, the lower
	// priority groups are the ones downgraded.
	sort.Slice(names, func(i, j int) bool {
		a, b := groups[names[i]][0].rec, groups[names[j]][0].rec
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		return names[i] < names[j]
	})
	recovered := 0
	for _, n := range names {
		ms := groups[n]
		var rp []cellcore.RecoveredPod
		recorded := false // some pod's record says the group had been downgraded
		for _, m := range ms {
			rp = append(rp, cellcore.RecoveredPod{PodKey: podKey(m.pod), Node: m.rec.Node, LeafCellIndices: m.rec.LeafCellIndices, Downgraded: m.rec.Downgraded})
			recorded = recorded || m.rec.Downgraded
			p.groups.track(m.pod, p.resource)
		}
		res, err := p.core.RecoverAffinityGroup(ms[0].rec.spec(), rp)
		if err != nil {
			logger.Error(err, "affinity group not recovered", "group", n)
			for _, m := range ms {
				p.event(m.pod, v1.EventTypeWarning, "RecoveryFailed", err.Error())
			}
			continue
		}
		if res.Downgraded {
			logger.Info(res.Reason, "group", n)
			// Every pod's record is to say so (a restart may have come
			// before all of them were written); the pods hear of it only if
			// it is news.
			note := ""
			if !recorded {
				note = "after a scheduler restart, " + res.Reason + "; it keeps running (priority -1), and any guaranteed group may preempt it"
			}
			p.downgraded(logger, n, note)
		}
		recovered++
	}
	logger.Info("recovered allocations", "groups", recovered, "nodes", len(nodes.Items), "virtualClusters", len(vcs.Items))
	return nil
}
