package hivesched

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// ReasonLazilyPreempted is the reason of the event on each pod of a
// guaranteed group that was downgraded to opportunistic: lazily preempted by
// a higher-priority group of its VC, or displaced because its VC shrank or
// was deleted. The group keeps running; any guaranteed group may preempt it.
const ReasonLazilyPreempted = "LazilyPreempted"

// downgraded makes a lazy downgrade visible on the group's pods: an event on
// each (unless note is empty: the pods said so already) and, in the
// background, the `downgraded` field of their persisted placement, so that a
// restarted scheduler keeps the group opportunistic. Called where the core
// reports downgrades (PreFilter, VC changes, recovery); it never calls the
// API server itself.
func (p *HiveSched) downgraded(logger klog.Logger, group, note string) {
	pods := p.groups.markDowngraded(group)
	for _, pod := range pods {
		if note != "" {
			p.event(pod, v1.EventTypeNormal, ReasonLazilyPreempted, note)
		}
		p.records.add(pod)
	}
	if note != "" {
		logger.Info("affinity group downgraded to opportunistic", "group", group, "pods", len(pods), "why", note)
	}
}

// lazyNote is the event text for a group lazily preempted by another group.
func lazyNote(victim, preemptor string, priority int32, vc string) string {
	return fmt.Sprintf("affinity group %s was lazily preempted by affinity group %s (priority %d), which needs its cells in virtual cluster %q: "+
		"it keeps running, now as opportunistic (priority -1), and any guaranteed group may preempt it", victim, preemptor, priority, vc)
}

// vcNote is the event text for a group displaced by a change of its VC.
func vcNote(victim, vc, change string) string {
	return fmt.Sprintf("virtual cluster %q %s: affinity group %s keeps running, now as opportunistic (priority -1), and any guaranteed group may preempt it",
		vc, change, victim)
}

// needsDowngradeRecord: the pod is running with a persisted placement of a
// group the core may have downgraded, and its record does not say so yet.
func (p *HiveSched) needsDowngradeRecord(pod *v1.Pod, group string) bool {
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || !p.groups.mayBeDowngraded(group) {
		return false
	}
	raw, ok := pod.Annotations[AnnotationPlacement]
	if !ok {
		return false
	}
	rec, err := decodePlacement(raw)
	return err == nil && !rec.Downgraded
}

// groupDowngraded asks the core whether the group runs downgraded now. The
// group index's mark only says it was at some point (a group rolled back and
// placed again is guaranteed again).
func (p *HiveSched) groupDowngraded(group string) bool {
	if !p.groups.mayBeDowngraded(group) {
		return false
	}
	st, ok := p.core.AffinityGroupStatus(group)
	return ok && st.Downgraded
}

// recordWriter patches the placement record of pods whose group was
// downgraded, in the background with retries (like the evictor, the
// scheduling cycle never waits for it). Work is keyed by pod and read back
// from the informer when done, so repeated requests collapse and each patch
// writes what the core says at that time; a patch that fails is retried with
// backoff until the pod no longer needs it. The pod informer hands it pods
// that were bound after the downgrade with a record that lacks it, too.
type recordWriter struct {
	queue  workqueue.TypedRateLimitingInterface[string]
	sync   func(ctx context.Context, key string) error
	synced cache.InformerSynced
}

func newRecordWriter(sync func(context.Context, string) error, synced cache.InformerSynced) *recordWriter {
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 30*time.Second)
	return &recordWriter{
		queue:  workqueue.NewTypedRateLimitingQueue[string](rl),
		sync:   sync,
		synced: synced,
	}
}

func (w *recordWriter) add(pod *v1.Pod) {
	w.queue.Add(pod.Namespace + "/" + pod.Name)
}

// run works the queue until ctx ends, once the pod informer has synced (the
// records are read from it).
func (w *recordWriter) run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
	}()
	if w.synced != nil && !cache.WaitForCacheSync(ctx.Done(), w.synced) {
		return
	}
	for {
		key, quit := w.queue.Get()
		if quit {
			return
		}
		err := w.sync(ctx, key)
		switch {
		case err == nil:
			w.queue.Forget(key)
		case ctx.Err() != nil:
		default:
			logger.Error(err, "recording a lazy downgrade in the pod's placement; retrying", "pod", key, "retries", w.queue.NumRequeues(key))
			w.queue.AddRateLimited(key)
		}
		w.queue.Done(key)
	}
}

// syncDowngradeRecord writes `downgraded` into a pod's placement record if
// the pod still runs, its record lacks it and the core says its group is
// downgraded. The patch is conditional on the pod's resourceVersion: the
// record is rewritten from the version read, never over a newer one.
func (p *HiveSched) syncDowngradeRecord(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := p.handle.SharedInformerFactory().Core().V1().Pods().Lister().Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return nil // Bind writes the record of a pod still to bind; a pod on its way out needs none
	}
	raw, ok := pod.Annotations[AnnotationPlacement]
	if !ok {
		return nil
	}
	rec, err := decodePlacement(raw)
	if err != nil || rec.Downgraded || !p.groupDowngraded(rec.Group) {
		return nil
	}
	if !p.signer.verify(pod) {
		return nil // not hivesched's record: nothing to keep up to date
	}
	rec.Downgraded = true
	encoded := rec.encode()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": pod.ResourceVersion,
		"annotations": map[string]string{
			AnnotationPlacement:          encoded,
			AnnotationPlacementSignature: p.signer.sign(pod, encoded),
		},
	}})
	if err != nil {
		return err
	}
	_, err = p.handle.ClientSet().CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		// A newer version (or a new pod of that name) exists: decide again
		// on it once the informer has it.
		return fmt.Errorf("pod %s changed meanwhile: %w", key, err)
	}
	return err
}
