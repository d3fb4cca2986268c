package hivesched

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgversioned "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	pginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"
)

// PodGroup interop (docs/affinitygroups.md): pods that carry
// scheduler-plugins' label scheduling.x-k8s.io/pod-group form one affinity
// group of the PodGroup's minMember pods, each of the pod's own size, so
// that operators that create PodGroups (Kubeflow, Spark, Volcano-style
// jobs) work unchanged. The VC comes from label hivesched.io/virtual-cluster
// on the PodGroup, else on the pod. The PodGroup CRD is optional: while it
// is not served (or PodGroups cannot be listed) the interop waits for it,
// and a GPU pod that names a PodGroup is told so.

// LabelPodGroup is scheduler-plugins' pod group label.
const LabelPodGroup = pgv1alpha1.PodGroupLabel

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
	onPG := func(obj interface{}) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if pg, ok := obj.(*pgv1alpha1.PodGroup); ok {
			// Pods that came before their PodGroup (or its CRD) are read again.
			p.groupObjectChanged(logger, pg.Namespace, labels.SelectorFromSet(labels.Set{LabelPodGroup: pg.Name}))
		}
	}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onPG,
		UpdateFunc: func(_, obj interface{}) { onPG(obj) },
	})
	// Set before the informer starts: its handler re-reads pods through it.
	lister := inf.Lister()
	p.pgs.lister.Store(&lister)
	f.Start(ctx.Done())
}

// requestFromPodGroup is the request of a pod of a PodGroup: the pod's own
// form with the group named after the PodGroup, minMember pods of its size,
// and the VC from the PodGroup's label (else the pod's). handled is false
// when the pod names no PodGroup or the interop is off.
func (p *HiveSched) requestFromPodGroup(pod *v1.Pod, res v1.ResourceName) (*podRequest, error, bool) {
	name, ok := pod.Labels[LabelPodGroup]
	if !ok || name == "" {
		return nil, nil, false
	}
	lister := p.pgs.lister.Load()
	if lister == nil {
		if leaves, _ := leafRequest(pod, res); leaves > 0 {
			return nil, fmt.Errorf("pod names PodGroup %q (label %s), but PodGroups (scheduling.x-k8s.io/v1alpha1) are not served: install scheduler-plugins' PodGroup CRD; hivesched reads it as soon as it is", name, LabelPodGroup), true
		}
		return nil, nil, false
	}
	pg, err := (*lister).PodGroups(pod.Namespace).Get(name)
	if err != nil {
		if leaves, _ := leafRequest(pod, res); leaves > 0 {
			return nil, fmt.Errorf("pod names PodGroup %q (label %s), which does not exist in namespace %q yet: it waits for it", name, LabelPodGroup, pod.Namespace), true
		}
		return nil, nil, false
	}
	vc := pg.Labels[LabelVirtualCluster]
	if vc == "" {
		vc = pod.Labels[LabelVirtualCluster]
	}
	if vc == "" {
		if leaves, _ := leafRequest(pod, res); leaves > 0 {
			return nil, fmt.Errorf("PodGroup %s/%s names no virtual cluster: label the PodGroup (or the pod) %s", pod.Namespace, name, LabelVirtualCluster), true
		}
		return nil, nil, false // not a GPU gang hivesched schedules
	}
	if pg.Spec.MinMember <= 0 {
		return nil, fmt.Errorf("PodGroup %s/%s: minMember must be positive, got %d", pod.Namespace, name, pg.Spec.MinMember), true
	}
	// The pod's own form, named after its PodGroup.
	q := pod.DeepCopy()
	q.Labels[LabelVirtualCluster] = vc
	q.Labels[LabelAffinityGroup] = name
	if q.Annotations == nil {
		q.Annotations = map[string]string{}
	}
	q.Annotations[AnnotationGroupMembers] = strconv.Itoa(int(pg.Spec.MinMember))
	req, err := parsePod(q, res)
	return req, err, true
}
