package hivesched

import (
	"context"
	"fmt"
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// PreEnqueue keeps a gang's pods out of the active queue until every member
// pod exists, so that the group is decided once with all members at hand.
//
// It runs under the scheduling queue's lock, so it parses nothing: a pod
// that may ask for cells waits until the pod informer's handler has read
// its request (that handler sends it back to the queue); plain pods pass.
// A pod requeued after its group's pod-group cycle releases what that
// cycle held and did not bind.
func (p *HiveSched) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	if !podrequest.MayAsk(pod, p.resource) {
		return nil
	}
	req, err, read := p.groups.Cached(pod)
	if !read {
		p.groups.Gate(pod)
		if req, err, read = p.groups.Cached(pod); !read { // read meanwhile: no wait
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "waiting for hivesched to read the pod's request")
		}
		p.groups.Ungate(pod)
	}
	if err != nil || req == nil {
		return nil // plain pods pass; bad specs are reported by PreFilter
	}
	// Requeued: a pod-group cycle that placed its group and did not bind
	// it is over (podgroupcycle.go).
	p.releaseEndedCycle(klog.FromContext(ctx), req.Group.Name)
	// Count the pod itself: the scheduler's queue may see it before our
	// informer handler does.
	if _, complete := p.groups.Track(pod); complete {
		// This pod completes its gang: the members gated before it may go.
		go p.activate(klog.FromContext(ctx), []string{req.Group.Name})
	}
	have := p.groups.MemberCount(req.Group.Name)
	if want := req.TotalPods(); have < want {
		if st, ok := p.core.AffinityGroupState(req.Group.Name); ok && (st == cellcore.AGAllocated || st == cellcore.AGBeingPreempted) {
			return nil // a replacement member of a running group
		}
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("waiting for the members of affinity group %s: %d of %d pods exist", req.Group.Name, have, want))
	}
	return nil
}

// Less orders the queue: each group's VC sequencer gives its key (the cell
// core's SequenceKeyOf: higher priority first, then the sequencer's share
// and age; pods that are not hivesched's by pod priority and age), then the
// group name, so that the members of one group come out together. Every key
// has the same shape, so the order is total and each VC's own order holds
// inside it (docs/policies.md).
func (p *HiveSched) Less(a, b fwk.QueuedEntityInfo) bool {
	ka, kb := p.entityKey(a), p.entityKey(b)
	if ka.seq != kb.seq {
		return cellcore.SequenceLess(ka.seq, kb.seq)
	}
	if ka.group != kb.group {
		return ka.group < kb.group
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

// entityKey is the queue key of a queued pod, or of a queued pod group
// (Kubernetes' Workload API, popped as one entity): a group's key is its
// first member's, as every member of one affinity group has the same key.
func (p *HiveSched) entityKey(e fwk.QueuedEntityInfo) queueKey {
	if pod := entityPod(e); pod != nil {
		return p.sequenceKey(pod)
	}
	return queueKey{seq: cellcore.SequenceKey{Priority: e.GetPriority(), Age: e.GetTimestamp().UnixNano()}}
}

// entityPod is a queued entity's pod: the pod itself, or a pod group's first
// unscheduled member (a composite group's gathers its leaf groups').
func entityPod(e any) *v1.Pod {
	switch x := e.(type) {
	case interface{ GetPodInfo() fwk.PodInfo }:
		return x.GetPodInfo().GetPod()
	case fwk.PodGroupInfo:
		if pods := x.GetUnscheduledPods(); len(pods) > 0 {
			return pods[0]
		}
	}
	return nil
}

type queueKey struct {
	seq   cellcore.SequenceKey
	group string
}

func (p *HiveSched) sequenceKey(pod *v1.Pod) queueKey {
	k := p.groups.SortKey(pod)
	prio := int32(min(max(k.Priority, math.MinInt32), math.MaxInt32))
	if k.VC == "" {
		return queueKey{seq: cellcore.SequenceKey{Priority: prio, Age: k.Created.UnixNano()}, group: k.Group}
	}
	return queueKey{seq: p.core.SequenceKeyOf(k.VC, k.Namespace, prio, k.Created), group: k.Group}
}
