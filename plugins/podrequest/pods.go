package podrequest

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// PodsOfNamespace lists the namespace's pods from the scheduler's pod
// lister.
//
// Why not l.Pods(namespace).List: kube-scheduler's pod informer is built
// without a namespace index (pkg/scheduler's newPodInformer), so that call
// finds no index, logs "Warning: can not retrieve list of objects using
// index" at verbosity 0, and scans every pod anyway. Every re-read of
// refused pods and every composite pod group read did so: hundreds of such
// lines in one benchmark run. Scanning here gives the same pods without the
// line. (Adding the index to the shared informer in New was tried and
// reverted in 3d4582b: two integration tests failed with it, for a cause
// not established; the scan stays.)
func PodsOfNamespace(l corelisters.PodLister, namespace string) ([]*v1.Pod, error) {
	all, err := l.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, p := range all {
		if p.Namespace == namespace {
			out = append(out, p)
		}
	}
	return out, nil
}
