package hivesched

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/plugins/podrequest"
)

// parse reads a pod's request as the index does, without caching it.
func (p *HiveSched) parse(pod *v1.Pod) (*podrequest.Request, error) {
	return p.resolver.Read(pod)
}

// groupObjectChanged re-reads the requests of the unbound pods an
// AffinityGroup (or PodGroup) describes whose request was refused before
// (they came before the object did) and sends them back to the active
// queue. Called by the informers' handlers.
func (p *HiveSched) groupObjectChanged(logger klog.Logger, namespace string, selector labels.Selector) {
	p.rereadRefused(logger, namespace, func(pod *v1.Pod) bool { return selector.Matches(labels.Set(pod.Labels)) })
}

// rereadRefused re-reads the refused requests of the namespace's unbound
// pods that match and sends them back to the active queue.
func (p *HiveSched) rereadRefused(logger klog.Logger, namespace string, match func(*v1.Pod) bool) {
	lister := p.handle.SharedInformerFactory().Core().V1().Pods().Lister()
	pods, err := lister.Pods(namespace).List(labels.Everything())
	if err != nil || len(pods) == 0 {
		return
	}
	activate := map[string]*v1.Pod{}
	for _, pod := range pods {
		if pod.Spec.NodeName != "" || !match(pod) || !p.groups.ForgetRefused(pod) {
			continue
		}
		p.groups.Track(pod) // read again, and counted for the gang gate
		activate[pod.Namespace+"/"+pod.Name] = pod
	}
	if len(activate) > 0 {
		p.handle.Activate(logger, activate)
	}
}
