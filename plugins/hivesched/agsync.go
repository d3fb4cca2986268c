package hivesched

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
)

// seedAGs notes every tracked member pod once this process has recovered
// (pods seen before were only indexed).
func (p *HiveSched) seedAGs() {
	if p.ags == nil {
		return
	}
	for _, pod := range p.groups.AllPods() {
		if req, err := p.request(pod); err == nil && req != nil {
			p.ags.Seen(pod, req)
		}
	}
}

// pendingTimedOut gives up on a group that waited too long: its pods get
// an event and are refused from now on (PreFilter asks ended); the core
// forgets it (a Preempting group's reservations go back). Its pods are
// left to their owner unless the VC says to delete them.
func (p *HiveSched) pendingTimedOut(logger klog.Logger, group string, pods []*v1.Pod) {
	st, ok := p.core.AffinityGroupState(group)
	if ok && st == cellcore.AGAllocated && p.groups.BoundCount(group) == 0 {
		// Placed by a PreFilter that ran while the timeout fired: its
		// members wait at Permit (or bind now, and a bound one is adopted
		// from its record); the timeout wins.
		p.rejectWaiting(group, "affinity group "+group+" failed: pending timeout")
		st = cellcore.AGPending
	}
	if ok && (st == cellcore.AGPending || st == cellcore.AGPreempting) {
		res, err := p.core.DeleteAffinityGroup(group)
		if err != nil {
			logger.Error(err, "forgetting a timed-out affinity group", "group", group)
		}
		p.vcs.Changed()
		if res.FreedLeaves > 0 {
			p.activateWaiting(logger, "")
		}
	}
	vcName := ""
	if len(pods) > 0 {
		if req, err := p.request(pods[0]); err == nil && req != nil {
			vcName = req.Group.VirtualCluster
		}
	}
	del := false
	if vc := p.vcs.Object(vcName); vc != nil {
		del = vc.Spec.DeletePodsOnPendingTimeout
	}
	logger.Info("affinity group pending timeout", "group", group, "deletePods", del)
	for _, pod := range pods {
		note := fmt.Sprintf("affinity group %s failed: it was pending longer than its pending timeout; its pods are no longer scheduled", group)
		if del {
			note += " and are deleted (the virtual cluster's deletePodsOnPendingTimeout)"
		} else {
			note += " and are left to their owner"
		}
		p.event(pod, v1.EventTypeWarning, "PendingTimeout", note)
	}
	if del {
		for _, pod := range pods {
			if err := p.deleter.Delete(context.Background(), pod); err != nil {
				logger.Error(err, "deleting a timed-out pod", "pod", klog.KObj(pod))
			}
		}
	}
}

func (p *HiveSched) onAG(logger klog.Logger, obj interface{}, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	ag, ok := obj.(*hv1.AffinityGroup)
	if !ok {
		return
	}
	p.ags.Object(ag, deleted)
	if !deleted && ag.Labels[hv1.LabelManagedBy] != hv1.ManagedByHivesched {
		// Pods that came before their explicit group are read again.
		p.groupObjectChanged(logger, ag.Namespace, labels.SelectorFromSet(labels.Set{LabelAffinityGroup: ag.Name}))
	}
}
