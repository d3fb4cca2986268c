package hivesched

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"

	"github.com/hivesched/hivesched/plugins/podrequest"
)

// Kubernetes' Workload API gangs (scheduling.k8s.io/v1beta1, feature gate
// GenericWorkload; docs/affinitygroups.md "Workload API"; podrequest reads
// a pod's request from its PodGroup).

// workloadAPI is what the plugin keeps of the Workload API, when the
// scheduler runs with GenericWorkload (nil otherwise: pods that name a pod
// group are then refused with a message saying so, as kube-scheduler
// ignores the field).
type workloadAPI struct {
	listers *podrequest.Workloads

	mu sync.Mutex
	// singleNoted: PodGroups (by UID) whose disruptionMode Single was
	// answered with an event once.
	singleNoted map[types.UID]bool
}

// workloadGateOn: the scheduler runs with the Workload API.
func workloadGateOn() bool {
	return utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload)
}

// startWorkloadInformers registers the PodGroup and Workload informers on the
// scheduler's informer factory (which the scheduler starts after the
// plugins are built) and re-reads the pods a PodGroup describes when it
// appears or changes.
func (p *HiveSched) startWorkloadInformers(logger klog.Logger) {
	if !workloadGateOn() {
		return
	}
	f := p.handle.SharedInformerFactory()
	pgInf := f.Scheduling().V1beta1().PodGroups()
	onPG := func(obj interface{}) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if pg, ok := obj.(*schedv1beta1.PodGroup); ok {
			p.podGroupObjectChanged(logger, pg.Namespace, pg.Name)
		}
	}
	p.wl = &workloadAPI{
		listers: &podrequest.Workloads{
			PodGroups: pgInf.Lister(),
			Workloads: f.Scheduling().V1beta1().Workloads().Lister(),
			Pods:      f.Core().V1().Pods().Lister(),
		},
		singleNoted: map[types.UID]bool{},
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.CompositePodGroup) {
		p.wl.listers.Composites = f.Scheduling().V1alpha3().CompositePodGroups().Lister()
	}
	_, _ = pgInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onPG,
		UpdateFunc: func(_, obj interface{}) { onPG(obj) },
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pg, ok := obj.(*schedv1beta1.PodGroup); ok {
				p.wl.forget(pg.UID)
			}
		},
	})
}

// podGroupObjectChanged re-reads the refused requests of the unbound pods
// that name the PodGroup (they may have come before it).
func (p *HiveSched) podGroupObjectChanged(logger klog.Logger, namespace, name string) {
	p.rereadRefused(logger, namespace, func(pod *v1.Pod) bool { return podrequest.PodGroupName(pod) == name })
}

// forget drops what was noted of a deleted PodGroup.
func (w *workloadAPI) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.singleNoted, uid)
}

// noteDisruptionMode answers, once per PodGroup, a pod group that asks for
// disruptionMode Single with an event on the PodGroup saying what hivesched
// does instead. Called by PreFilter with the pod's valid request.
func (p *HiveSched) noteDisruptionMode(pod *v1.Pod) {
	name := podrequest.PodGroupName(pod)
	if name == "" || p.wl == nil {
		return
	}
	pg, err := p.wl.listers.PodGroups.PodGroups(pod.Namespace).Get(name)
	if err != nil || !p.wl.noteSingleDisruption(pg) {
		return
	}
	p.event(pg, v1.EventTypeNormal, "WholeGangDisruption",
		"disruptionMode Single is served as All: hivesched preempts an affinity group whole (every pod of the gang is deleted together, never one), so that a gang never runs partly")
}

// noteSingleDisruption reports whether this is the first time hivesched
// sees the PodGroup asking for disruptionMode Single, which it answers
// once with an event: gangs are preempted whole.
func (w *workloadAPI) noteSingleDisruption(pg *schedv1beta1.PodGroup) bool {
	if pg.Spec.DisruptionMode == nil || pg.Spec.DisruptionMode.Single == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.singleNoted[pg.UID] {
		return false
	}
	w.singleNoted[pg.UID] = true
	return true
}
