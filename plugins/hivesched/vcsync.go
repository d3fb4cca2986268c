package hivesched

import (
	"fmt"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// applyVC hands a VC's spec to the core. A spec the cluster cannot host is
// Rejected (status condition and event); the other VCs keep working.
func (p *HiveSched) applyVC(logger klog.Logger, vc *hv1.VirtualCluster) {
	res, newlyRejected, err := p.vcs.Apply(vc)
	if err != nil {
		logger.Error(err, "virtual cluster rejected", "virtualCluster", vc.Name)
		if newlyRejected {
			p.event(vc, "Warning", "Rejected", err.Error())
		}
		return
	}
	for _, g := range res.Downgraded {
		logger.Info("virtual cluster shrank: affinity group runs on as opportunistic (lazy preemption)", "virtualCluster", vc.Name, "group", g)
		p.event(vc, "Normal", "Downgraded", fmt.Sprintf("affinity group %s no longer fits the virtual cluster and runs on as opportunistic", g))
		p.downgraded(logger, g, vcNote(g, vc.Name, "shrank below what its groups use"))
	}
	p.activateWaiting(logger, vc.Name) // its capacity changed
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

func (p *HiveSched) onVC(logger klog.Logger, obj interface{}, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	vc, ok := obj.(*hv1.VirtualCluster)
	if !ok {
		return
	}
	if !deleted {
		if !p.vcs.Refresh(vc) { // unless only its status changed
			p.applyVC(logger, vc)
		}
		return
	}
	res, err := p.vcs.Remove(vc.Name)
	if err != nil {
		logger.V(2).Info("removing virtual cluster", "virtualCluster", vc.Name, "err", err)
	}
	for _, g := range res.Downgraded {
		logger.Info("virtual cluster deleted: affinity group runs on as opportunistic", "virtualCluster", vc.Name, "group", g)
		p.downgraded(logger, g, vcNote(g, vc.Name, "was deleted"))
	}
	p.vcs.Changed()
}
