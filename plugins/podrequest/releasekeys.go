package podrequest

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A release key names an object whose arrival (or change) can turn a pod's
// refused request into a valid one: its explicit AffinityGroup, its
// scheduler-plugins PodGroup, its Workload API pod group, a ResourceClaim
// it names, or, for a claim made from a template, the pod itself (the claim
// is owned by it). The scheduler indexes refused pods by these keys so that
// an object's event re-reads the pods it concerns, not every pod of its
// namespace (groupindex's Released).

// ReleaseKeyAffinityGroup is the key of the explicit AffinityGroup name.
func ReleaseKeyAffinityGroup(namespace, name string) string {
	return "ag/" + namespace + "/" + name
}

// ReleaseKeyPodGroup is the key of the scheduler-plugins PodGroup name.
func ReleaseKeyPodGroup(namespace, name string) string {
	return "pg/" + namespace + "/" + name
}

// ReleaseKeyWorkloadPodGroup is the key of the Workload API pod group name
// (its composite, if any, releases the keys of its pod groups).
func ReleaseKeyWorkloadPodGroup(namespace, name string) string {
	return "wpg/" + namespace + "/" + name
}

// ReleaseKeyClaim is the key of the ResourceClaim name.
func ReleaseKeyClaim(namespace, name string) string {
	return "claim/" + namespace + "/" + name
}

// ReleaseKeyPod is the key of the pod uid, released by the claims it owns
// (a claim made from the pod's ResourceClaimTemplate).
func ReleaseKeyPod(uid types.UID) string {
	return "pod/" + string(uid)
}

// ReleaseKeys are the keys of the objects that can release the pod's
// refused request (none: no object can, as for a plain pod).
func ReleaseKeys(pod *v1.Pod) []string {
	var keys []string
	ns := pod.Namespace
	if name := pod.Labels[LabelAffinityGroup]; name != "" {
		keys = append(keys, ReleaseKeyAffinityGroup(ns, name))
	}
	if name := pod.Labels[LabelPodGroup]; name != "" {
		keys = append(keys, ReleaseKeyPodGroup(ns, name))
	}
	if name := PodGroupName(pod); name != "" {
		keys = append(keys, ReleaseKeyWorkloadPodGroup(ns, name))
	}
	for i := range pod.Spec.ResourceClaims {
		if n := pod.Spec.ResourceClaims[i].ResourceClaimName; n != nil {
			keys = append(keys, ReleaseKeyClaim(ns, *n))
		}
	}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			keys = append(keys, ReleaseKeyClaim(ns, *s.ResourceClaimName))
		}
	}
	if len(pod.Spec.ResourceClaims) > 0 {
		keys = append(keys, ReleaseKeyPod(pod.UID))
	}
	return keys
}
