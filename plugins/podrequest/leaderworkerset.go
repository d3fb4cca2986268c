package podrequest

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// LeaderWorkerSet interop (README, "LeaderWorkerSet"): LWS
// (sigs.k8s.io/lws) runs each replica as a group of `size` pods, a leader
// (its leader StatefulSet's pod <set>-<index>) and size-1 workers (the
// worker StatefulSet <set>-<index> the LWS controller makes for it). Every
// pod of a group carries the set's name, the group's index and the size;
// with hivesched's VC label on its templates each replica group is one
// gang, named after its leader pod, whose shape is read from its pods (a
// leader without GPUs is a member without leaf cells). Never one gang
// across replicas: a group label written on the templates would be the
// same for every replica, so it is refused.

// The labels and annotation LWS puts on the pods of a replica group (its
// api/leaderworkerset/v1; the group index is set on the leader by LWS's
// pod webhook and copied onto the workers by its controller).
const (
	LabelLWSName       = "leaderworkerset.sigs.k8s.io/name"
	LabelLWSGroupIndex = "leaderworkerset.sigs.k8s.io/group-index"
	AnnotationLWSSize  = "leaderworkerset.sigs.k8s.io/size"

	lwsExclusiveTopology = "leaderworkerset.sigs.k8s.io/exclusive-topology"
)

// lwsGroup is the LeaderWorkerSet replica group a pod of hivesched's is in:
// ok false for a pod of none, or one that names no VC (not hivesched's,
// or refused by Parse for its GPUs without a VC).
func lwsGroup(pod *v1.Pod) (set, index string, ok bool) {
	set = pod.Labels[LabelLWSName]
	if set == "" || pod.Labels[LabelVirtualCluster] == "" {
		return "", "", false
	}
	return set, pod.Labels[LabelLWSGroupIndex], true
}

// fromLeaderWorkerSet is the request of a pod of a LeaderWorkerSet replica
// group: the pod's own form, in the gang named after the group's leader
// (<set>-<index>) of the group's size. handled is false for a pod of no
// LeaderWorkerSet, or one that names no VC.
func (r *Resolver) fromLeaderWorkerSet(pod *v1.Pod) (*Request, error, bool) {
	set, index, ok := lwsGroup(pod)
	if !ok {
		return nil, nil, false
	}
	if own := ownGroupForm(pod); own != "" {
		return nil, fmt.Errorf("pod of LeaderWorkerSet %s/%s names %s: its templates are every replica's, so that name would make one gang across replicas; drop it: hivesched makes each replica group one gang", pod.Namespace, set, own), true
	}
	if _, err := strconv.ParseUint(index, 10, 31); err != nil {
		return nil, fmt.Errorf("pod of LeaderWorkerSet %s/%s has no replica group index (label %s=%q): LeaderWorkerSet's pod webhook labels every pod of a group; is its controller running with its webhooks?", pod.Namespace, set, LabelLWSGroupIndex, index), true
	}
	s := pod.Annotations[AnnotationLWSSize]
	size, err := strconv.ParseInt(s, 10, 32)
	if err != nil || size < 1 {
		return nil, fmt.Errorf("pod of LeaderWorkerSet %s/%s: annotation %s=%q is not a positive number of pods", pod.Namespace, set, AnnotationLWSSize, s), true
	}
	group := set + "-" + index
	shape, _, err := r.gangShape(pod, fmt.Sprintf("LeaderWorkerSet %s/%s replica group %s", pod.Namespace, set, index), int32(size))
	if IsAwaiting(err) {
		// The two ways an LWS group never fills: its workers are made only
		// once its leader runs or is scheduled, and a gang binds no
		// member alone.
		return nil, Awaiting(err.Error() + "; LeaderWorkerSet makes a group's workers when its leader pod is created, but with startupPolicy LeaderReady only once the leader runs, and with annotation " + lwsExclusiveTopology + " only once it is scheduled, which a gang never lets happen: use startupPolicy LeaderCreated and no exclusive placement"), true
	}
	if err != nil {
		return nil, err, true
	}
	q := pod.DeepCopy()
	q.Labels[LabelAffinityGroup] = group
	if q.Annotations == nil {
		q.Annotations = map[string]string{}
	}
	q.Annotations[AnnotationGroupMembers] = shape
	req, err := Parse(q, r.resource)
	return req, err, true
}
