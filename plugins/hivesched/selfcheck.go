package hivesched

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/plugins/metrics"
)

// ownWrite notes the outcome of one of the scheduler's own writes (of pod,
// or of object namespace/name when pod is nil). A write refused by
// admission is an installation error (plugins/selfcheck): it is logged as an
// error naming the write and the policy's message, counted, told on the
// pod, and makes the inspect server's /readyz fail until a write of that
// kind goes through.
func (p *HiveSched) ownWrite(pod *v1.Pod, write, object string, err error) {
	if pod != nil {
		object = pod.Namespace + "/" + pod.Name
	}
	if !p.writes.Observe(write, object, err) {
		return
	}
	metrics.OwnWriteRefused(write)
	klog.Background().Error(err, "the scheduler's own write was refused by admission: is the scheduler the identity RBAC lets write placements.hivesched.io (manifests/admission, manifests/scheduler/rbac.yaml)?",
		"write", write, "object", object, "scheduler", p.schedulerName)
	if pod != nil {
		p.event(pod, v1.EventTypeWarning, "PlacementWriteRefused",
			"the scheduler's own "+write+" write was refused by admission (an installation error: the scheduler is not the identity the policies exempt): "+err.Error())
	}
}
