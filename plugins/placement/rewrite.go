package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// RecordWriter patches the placement record of pods whose group was
// downgraded, in the background with retries (the scheduling cycle never
// waits for it). Work is keyed by pod and read back from the informer when
// done, so repeated requests collapse and each patch writes what the core
// says at that time; a patch that fails is retried with backoff until the
// pod no longer needs it. The pod informer hands it pods that were bound
// after the downgrade with a record that lacks it, too.
type RecordWriter struct {
	queue  workqueue.TypedRateLimitingInterface[string]
	sync   func(ctx context.Context, key string) error
	synced cache.InformerSynced
}

// NewDowngradeWriter writes `downgraded` into the records of running pods
// whose group downgraded says runs downgraded now. Pods are read from the
// lister (once synced), and patched through client.
//
// observe, if set, is told the outcome of every rewrite (the object
// namespace/name, the error): the scheduler's self-check.
//
// promoted, if set, gives the record a pod placed as an extra pod of an
// elastic gang has now that it took a member's slot (ok false: none).
func NewDowngradeWriter(client kubernetes.Interface, pods corelisters.PodLister, synced cache.InformerSynced, signer *Signer, downgraded func(group string) bool, observe func(object string, err error),
	promoted func(pod *v1.Pod, rec Record) (Record, bool)) *RecordWriter {
	d := &downgrades{client: client, pods: pods, signer: signer, downgraded: downgraded, observe: observe, promoted: promoted}
	return newRecordWriter(d.sync, synced)
}

func newRecordWriter(sync func(context.Context, string) error, synced cache.InformerSynced) *RecordWriter {
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 30*time.Second)
	return &RecordWriter{
		queue:  workqueue.NewTypedRateLimitingQueue[string](rl),
		sync:   sync,
		synced: synced,
	}
}

// Add asks for the pod's record to be brought up to date.
func (w *RecordWriter) Add(pod *v1.Pod) {
	w.queue.Add(pod.Namespace + "/" + pod.Name)
}

// ShutDown stops a writer that never ran (Run stops it when its context
// ends).
func (w *RecordWriter) ShutDown() { w.queue.ShutDown() }

// Run works the queue until ctx ends, once the pod informer has synced (the
// records are read from it).
func (w *RecordWriter) Run(ctx context.Context) {
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

// downgrades is the RecordWriter's work: the downgrade of a pod's group.
type downgrades struct {
	client     kubernetes.Interface
	pods       corelisters.PodLister
	signer     *Signer
	downgraded func(group string) bool
	observe    func(object string, err error)
	promoted   func(pod *v1.Pod, rec Record) (Record, bool)
}

// sync writes `downgraded` into a pod's placement record if the pod still
// runs, its record lacks it and the core says its group is downgraded. The
// patch is conditional on the pod's resourceVersion: the record is
// rewritten from the version read, never over a newer one.
func (d *downgrades) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := d.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return nil // Bind writes the record of a pod still to bind; a pod on its way out needs none
	}
	raw, ok := pod.Annotations[Annotation]
	if !ok {
		return nil
	}
	rec, err := Decode(raw)
	if err != nil {
		return nil
	}
	changed := false
	if d.promoted != nil && rec.ExtraOf != "" {
		if nr, ok := d.promoted(pod, rec); ok {
			rec, changed = nr, true
		}
	}
	if !rec.Downgraded && d.downgraded(rec.Group) {
		rec.Downgraded, changed = true, true
	}
	if !changed {
		return nil
	}
	if !d.signer.Verify(pod) {
		return nil // not hivesched's record: nothing to keep up to date
	}
	encoded := rec.Encode()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": pod.ResourceVersion,
		"annotations": map[string]string{
			Annotation:          encoded,
			AnnotationSignature: d.signer.sign(pod, encoded),
		},
	}})
	if err != nil {
		return err
	}
	_, err = d.client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if d.observe != nil && (err == nil || !apierrors.IsConflict(err) && !apierrors.IsNotFound(err)) {
		d.observe(key, err)
	}
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
