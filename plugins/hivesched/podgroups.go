package hivesched

import (
	"context"
	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgversioned "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	pginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	"github.com/hivesched/hivesched/plugins/podrequest"
)

// PodGroup interop (docs/affinitygroups.md; podrequest reads the pods of a
// PodGroup). The PodGroup CRD is optional: while it is not served (or
// PodGroups cannot be listed) the interop waits for it.

// podGroupCRDPoll is how often hivesched looks for the PodGroup CRD while
// it is not served: an operator installed after the scheduler started
// (Kubeflow's, say) brings it, and no restart should be needed.
const podGroupCRDPoll = 10 * time.Second

// podGroups reads scheduler-plugins' PodGroups once their CRD is served.
type podGroups struct {
	client pgversioned.Interface
	// lister is set once the informer runs (nil: the CRD is not served,
	// or PodGroups cannot be listed).
	lister atomic.Pointer[pglisters.PodGroupLister]
}

func newPodGroups(kc *rest.Config) (*podGroups, error) {
	c, err := pgversioned.NewForConfig(kc)
	if err != nil {
		return nil, err
	}
	return &podGroups{client: c}, nil
}

// listerOrNil is the PodGroup lister, nil while PodGroups are not served.
func (g *podGroups) listerOrNil() pglisters.PodGroupLister {
	if l := g.lister.Load(); l != nil {
		return *l
	}
	return nil
}

// startPodGroupInformer starts the PodGroup informer now if PodGroups can
// be listed, else as soon as they can (polling every podGroupCRDPoll).
func (p *HiveSched) startPodGroupInformer(ctx context.Context, logger klog.Logger) {
	listable := func() error {
		_, err := p.pgs.client.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1})
		return err
	}
	if err := listable(); err != nil {
		logger.Info("PodGroup interop waits: PodGroups (scheduling.x-k8s.io/v1alpha1) cannot be listed yet; it starts when their CRD is installed", "err", err)
		go func() {
			_ = wait.PollUntilContextCancel(ctx, podGroupCRDPoll, false, func(context.Context) (bool, error) { return listable() == nil, nil })
			if ctx.Err() == nil {
				logger.Info("PodGroup interop on: PodGroups (scheduling.x-k8s.io/v1alpha1) are served")
				p.runPodGroupInformer(ctx, logger)
			}
		}()
		return
	}
	p.runPodGroupInformer(ctx, logger)
}

func (p *HiveSched) runPodGroupInformer(ctx context.Context, logger klog.Logger) {
	f := pginformers.NewSharedInformerFactory(p.pgs.client, 0)
	inf := f.Scheduling().V1alpha1().PodGroups()
	_, _ = inf.Informer().AddEventHandler(handleGroupObject(logger, p.onPodGroup))
	// Set before the informer starts: its handler re-reads pods through it.
	lister := inf.Lister()
	p.pgs.lister.Store(&lister)
	f.Start(ctx.Done())
}

// onPodGroup re-reads the pods that came before their PodGroup (or its
// CRD).
func (p *HiveSched) onPodGroup(logger klog.Logger, obj interface{}, deleted, reread bool) {
	if pg, ok := obj.(*pgv1alpha1.PodGroup); ok && reread {
		p.rereadReleased(logger, "podgroup", []string{podrequest.ReleaseKeyPodGroup(pg.Namespace, pg.Name)},
			func(pod *v1.Pod) bool { return pod.Labels[podrequest.LabelPodGroup] == pg.Name })
	}
}

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
	// missingNoted: pods (by UID) told that their PodGroup does not exist.
	missingNoted map[types.UID]bool
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
	p.wl = &workloadAPI{
		listers: &podrequest.Workloads{
			PodGroups: pgInf.Lister(),
			Workloads: f.Scheduling().V1beta1().Workloads().Lister(),
			Pods:      f.Core().V1().Pods().Lister(),
		},
		singleNoted:  map[types.UID]bool{},
		missingNoted: map[types.UID]bool{},
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.CompositePodGroup) {
		cInf := f.Scheduling().V1alpha3().CompositePodGroups()
		p.wl.listers.Composites = cInf.Lister()
		_, _ = cInf.Informer().AddEventHandler(handleGroupObject(logger, p.onCompositePodGroup))
	}
	_, _ = pgInf.Informer().AddEventHandler(handleGroupObject(logger, p.onWorkloadPodGroup))
}

// onCompositePodGroup re-reads the refused requests of the unbound pods of
// the composite's pod groups: the informers deliver the composite, its
// pod groups and their pods in no set order, and a pod read before its
// composite was seen waits for it.
func (p *HiveSched) onCompositePodGroup(logger klog.Logger, obj interface{}, deleted, reread bool) {
	cpg, ok := obj.(*schedv1alpha3.CompositePodGroup)
	if !ok || !reread {
		return
	}
	p.rereadComposite(logger, cpg.Namespace, cpg.Name)
}

// compositeMemberRead re-reads the refused requests of the other pods of the
// composite of the pod's pod group, if it has one.
func (p *HiveSched) compositeMemberRead(logger klog.Logger, pod *v1.Pod) {
	name := podrequest.PodGroupName(pod)
	if name == "" || p.wl == nil || p.wl.listers.Composites == nil {
		return
	}
	pg, err := p.wl.listers.PodGroups.PodGroups(pod.Namespace).Get(name)
	if err != nil || pg.Spec.ParentCompositePodGroupName == nil {
		return
	}
	p.rereadComposite(logger, pod.Namespace, *pg.Spec.ParentCompositePodGroupName)
}

// rereadComposite re-reads the refused requests of the unbound pods of the
// composite's pod groups (those the PodGroup informer shows).
func (p *HiveSched) rereadComposite(logger klog.Logger, namespace, composite string) {
	pgs, err := p.wl.listers.PodGroups.PodGroups(namespace).List(labels.Everything())
	if err != nil {
		return
	}
	children := map[string]bool{}
	var keys []string
	for _, pg := range pgs {
		if pg.Spec.ParentCompositePodGroupName != nil && *pg.Spec.ParentCompositePodGroupName == composite {
			children[pg.Name] = true
			keys = append(keys, podrequest.ReleaseKeyWorkloadPodGroup(namespace, pg.Name))
		}
	}
	if len(keys) == 0 {
		return
	}
	p.rereadReleased(logger, "composite", keys, func(pod *v1.Pod) bool { return children[podrequest.PodGroupName(pod)] })
}

// onWorkloadPodGroup re-reads the refused requests of the unbound pods that
// name the PodGroup (they may have come before it); a deleted one is
// forgotten.
func (p *HiveSched) onWorkloadPodGroup(logger klog.Logger, obj interface{}, deleted, reread bool) {
	pg, ok := obj.(*schedv1beta1.PodGroup)
	switch {
	case !ok:
	case deleted:
		p.wl.forget(pg.UID)
	case !reread: // a status write or a resync
	case pg.Spec.ParentCompositePodGroupName != nil && p.wl.listers.Composites != nil:
		// A composite's request needs all of its pod groups: the pods of
		// its other pod groups, read before this one was seen, wait too.
		p.rereadComposite(logger, pg.Namespace, *pg.Spec.ParentCompositePodGroupName)
	default:
		p.rereadReleased(logger, "workload_podgroup", []string{podrequest.ReleaseKeyWorkloadPodGroup(pg.Namespace, pg.Name)},
			func(pod *v1.Pod) bool { return podrequest.PodGroupName(pod) == pg.Name })
	}
}

// noteMissingPodGroup tells a pod of this profile, once, that the Workload
// API PodGroup it names does not exist (err is its read's refusal): the
// scheduler's queue keeps such a pod aside until the PodGroup appears, so
// no scheduling cycle, and no FailedScheduling event, ever says why it
// waits. The API server is asked first, in the background: the pod
// informer can deliver a Job's pod before the PodGroup informer delivers
// the PodGroup the Job controller created before it.
func (p *HiveSched) noteMissingPodGroup(logger klog.Logger, pod *v1.Pod, err error) {
	name, missing := podrequest.IsMissingPodGroup(err)
	if !missing || p.wl == nil || pod.Spec.NodeName != "" || !p.ours(pod) || !p.wl.noteMissing(pod.UID, true) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, getErr := p.handle.ClientSet().SchedulingV1beta1().PodGroups(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if !apierrors.IsNotFound(getErr) {
			// It exists (the pod is read again when the informer
			// delivers it), or the API server cannot tell: a later read
			// may tell the pod.
			p.wl.noteMissing(pod.UID, false)
			logger.V(4).Info("pod's PodGroup not in the informer yet", "pod", klog.KObj(pod), "podGroup", name, "err", getErr)
			return
		}
		p.event(pod, v1.EventTypeWarning, "InvalidSchedulingSpec", err.Error())
	}()
}

// noteMissing records (on) or forgets that the pod was told its PodGroup
// is missing, and reports whether that changed anything.
func (w *workloadAPI) noteMissing(pod types.UID, on bool) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.missingNoted[pod] == on {
		return false
	}
	if on {
		w.missingNoted[pod] = true
	} else {
		delete(w.missingNoted, pod)
	}
	return true
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
