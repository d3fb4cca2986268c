package hivesched

import (
	"context"
	"sync/atomic"
	"time"

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
	onPG := func(obj interface{}) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if pg, ok := obj.(*pgv1alpha1.PodGroup); ok {
			// Pods that came before their PodGroup (or its CRD) are read again.
			p.groupObjectChanged(logger, pg.Namespace, labels.SelectorFromSet(labels.Set{podrequest.LabelPodGroup: pg.Name}))
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
