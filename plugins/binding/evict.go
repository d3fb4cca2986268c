package binding

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// Evictor deletes the pods of victim groups in the background, so that a
// scheduling cycle does not wait for the API server (PostFilter used to
// delete them one by one: in the 5000-node preemption benchmark that was
// most of the scheduling thread's time). A deletion that fails is retried
// with backoff until the pod is gone, or replaced, or the scheduler stops;
// the preemptor stays Preempting meanwhile (its cells Reserving) and is
// requeued when the last victim pod is gone.
type Evictor struct {
	ctx    context.Context // the scheduler's lifetime, not a cycle's
	delete func(context.Context, *v1.Pod) error
	// stillVictim is asked before every attempt: the preemption may have
	// been called off meanwhile (its preemptor deleted, or placed
	// elsewhere: the victim group went back to Allocated, AG x2), and a pod
	// that is no longer a victim must not be killed by a retry.
	stillVictim func(*v1.Pod) bool
	backoff     wait.Backoff
	// quiet is how long a pod whose deletion succeeded is not asked for
	// again: the informer may not have seen it go yet.
	quiet time.Duration

	mu       sync.Mutex
	inflight map[types.UID]bool
	deleted  map[types.UID]time.Time
}

// NewEvictor deletes pods with del for as long as ctx lasts, asking
// stillVictim before every attempt.
func NewEvictor(ctx context.Context, del func(context.Context, *v1.Pod) error, stillVictim func(*v1.Pod) bool) *Evictor {
	return &Evictor{
		ctx:         ctx,
		delete:      del,
		stillVictim: stillVictim,
		backoff:     wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 10, Cap: 30 * time.Second},
		quiet:       30 * time.Second,
		inflight:    map[types.UID]bool{},
		deleted:     map[types.UID]time.Time{},
	}
}

// Evict starts deleting the pods that are not on their way out already (a
// deletion in flight or just done, or a deletion timestamp set by anyone)
// and returns those it started.
func (e *Evictor) Evict(logger klog.Logger, pods []*v1.Pod) []*v1.Pod {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	for uid, at := range e.deleted {
		if now.Sub(at) > e.quiet {
			delete(e.deleted, uid)
		}
	}
	var started []*v1.Pod
	for _, pod := range pods {
		if _, done := e.deleted[pod.UID]; done || pod.DeletionTimestamp != nil || e.inflight[pod.UID] {
			continue
		}
		e.inflight[pod.UID] = true
		started = append(started, pod)
		go e.run(logger, pod)
	}
	return started
}

func (e *Evictor) run(logger klog.Logger, pod *v1.Pod) {
	var last error
	calledOff := false
	err := wait.ExponentialBackoffWithContext(e.ctx, e.backoff, func(ctx context.Context) (bool, error) {
		if !e.stillVictim(pod) {
			calledOff = true
			return true, nil
		}
		if last = e.delete(ctx, pod); last != nil {
			logger.Error(last, "deleting a victim pod; retrying", "pod", klog.KObj(pod))
			return false, nil
		}
		return true, nil
	})
	e.mu.Lock()
	delete(e.inflight, pod.UID)
	if err == nil && !calledOff {
		e.deleted[pod.UID] = time.Now()
	}
	e.mu.Unlock()
	if calledOff {
		logger.Info("not deleting a pod that is no longer a victim: its preemption was called off", "pod", klog.KObj(pod))
		return
	}
	if err != nil && e.ctx.Err() == nil {
		// The preemptor's next scheduling attempt evicts it again.
		logger.Error(last, "giving up deleting a victim pod for now", "pod", klog.KObj(pod))
	}
}

// Deleter deletes pods the scheduler gives up, each with at most a grace
// period.
type Deleter struct {
	client kubernetes.Interface
	grace  int64 // seconds: the most a pod is given to stop
}

// NewDeleter deletes through client with at most grace seconds (the
// victimGracePeriodSeconds arg).
func NewDeleter(client kubernetes.Interface, grace int64) Deleter {
	return Deleter{client: client, grace: grace}
}

// Delete deletes the pod (that very pod: a replacement of the same name
// is left alone); a pod already gone, or replaced, is no error.
func (d Deleter) Delete(ctx context.Context, pod *v1.Pod) error {
	uid := pod.UID
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, GracePeriodSeconds: gracePeriod(pod, d.grace)}
	err := d.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // already gone (or replaced)
	}
	return err
}

// gracePeriod is the grace period a pod is deleted with: its own
// terminationGracePeriodSeconds (default 30 s) capped at limit. A tenant's
// year-long grace period would otherwise hold the preemptor's cells
// (possibly another VC's) for a year.
func gracePeriod(pod *v1.Pod, limit int64) *int64 {
	own := int64(v1.DefaultTerminationGracePeriodSeconds)
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		own = *g
	}
	return ptr.To(min(max(own, 0), limit))
}
