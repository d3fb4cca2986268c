package hivesched

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/hivesched/hivesched/plugins/podrequest"
)

// No gang waits silently. A gang waits for its members before anything is
// scheduled (PreEnqueue; a framework gang's shape waits for all its pods),
// and the queue's PreEnqueue says why to no one: no scheduling cycle runs,
// so no FailedScheduling event. A member still waiting waitingEventDelay
// after it was seen gets one event, WaitingForMembers, that names what its
// gang waits for (how many of its pods exist); the AffinityGroup says the
// same once the gang is known. The delay keeps the gangs whose pods are
// created together (nearly all) from writing an event each.
const waitingEventDelay = 5 * time.Second

// watchWaiting notes an unbound member whose gang waits, once per pod.
func (p *HiveSched) watchWaiting(pod *v1.Pod) {
	if _, seen := p.waiting.LoadOrStore(pod.UID, true); seen {
		return
	}
	time.AfterFunc(waitingEventDelay, func() { p.waitingEvent(pod) })
}

// waitingEvent tells a member still waiting for its gang's members why.
func (p *HiveSched) waitingEvent(pod *v1.Pod) {
	cur, err := p.handle.SharedInformerFactory().Core().V1().Pods().Lister().Pods(pod.Namespace).Get(pod.Name)
	if err != nil || cur.UID != pod.UID || cur.Spec.NodeName != "" {
		p.waiting.Delete(pod.UID)
		return
	}
	msg := ""
	switch req, err := p.groups.Read(cur); {
	case podrequest.IsWaiting(err):
		msg = err.Error()
	case err == nil && req != nil:
		if have, want := p.groups.MemberCount(req.Group.Name), req.TotalPods(); have < want {
			msg = fmt.Sprintf("affinity group %s waits for its members: %d of its %d pods exist (members %s); it is placed, all or nothing, once they do",
				req.Group.Name, have, want, podrequest.Shape(req))
		}
	}
	if msg == "" {
		p.waiting.Delete(pod.UID) // not waiting (any more): a later wait is told again
		return
	}
	p.event(cur, v1.EventTypeNormal, "WaitingForMembers", msg)
}
