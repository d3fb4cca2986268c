package dra

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
)

// View is the pod as the profile's DynamicResources plugin sees it in a
// hivesched profile: without its GPU claims (spec.resourceClaims entries
// whose claim is a GPU claim, and the containers' references to them) and
// without the leaf cell resource (so that DynamicResources' extended
// resource path, which allocates devices of a DeviceClass that maps
// nvidia.com/gpu on nodes that do not advertise it, never allocates GPUs
// for it). hivesched alone allocates GPU claims; DynamicResources
// allocates every other claim. An entry whose claim does not exist yet
// stays in the view (DynamicResources waits for it, and sees it classified
// once it exists: both read the same cache). The pod itself is returned
// when there is nothing to hide.
func (c Config) View(pod *v1.Pod, leaf v1.ResourceName, get ClaimGetter) *v1.Pod {
	hide := sets.New[string]()
	if c.Enabled() {
		for i := range pod.Spec.ResourceClaims {
			pc := &pod.Spec.ResourceClaims[i]
			name, _, err := resourceclaim.Name(pod, pc)
			if err != nil || name == nil {
				continue
			}
			if claim, err := get(pod.Namespace, *name); err == nil && c.IsGPUClaim(claim) {
				hide.Insert(pc.Name)
			}
		}
	}
	strip := leaf != "" && requestsResource(pod, leaf)
	if hide.Len() == 0 && !strip {
		return pod
	}
	view := *pod
	view.Spec = *pod.Spec.DeepCopy()
	view.Spec.ResourceClaims = slices.DeleteFunc(view.Spec.ResourceClaims, func(pc v1.PodResourceClaim) bool { return hide.Has(pc.Name) })
	for _, cs := range [][]v1.Container{view.Spec.InitContainers, view.Spec.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			r.Claims = slices.DeleteFunc(r.Claims, func(rc v1.ResourceClaim) bool { return hide.Has(rc.Name) })
			if strip {
				delete(r.Requests, leaf)
				delete(r.Limits, leaf)
			}
		}
	}
	if view.Spec.Resources != nil {
		view.Spec.Resources.Claims = slices.DeleteFunc(view.Spec.Resources.Claims, func(rc v1.ResourceClaim) bool { return hide.Has(rc.Name) })
		if strip {
			delete(view.Spec.Resources.Requests, leaf)
			delete(view.Spec.Resources.Limits, leaf)
		}
	}
	return &view
}

// requestsResource reports whether a container (or the pod's own
// resources) requests or limits the resource.
func requestsResource(pod *v1.Pod, name v1.ResourceName) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if _, ok := cs[i].Resources.Requests[name]; ok {
				return true
			}
			if _, ok := cs[i].Resources.Limits[name]; ok {
				return true
			}
		}
	}
	if r := pod.Spec.Resources; r != nil {
		_, a := r.Requests[name]
		_, b := r.Limits[name]
		return a || b
	}
	return false
}

// RequestsResource reports whether a container (or the pod's own
// resources) requests or limits the resource.
func RequestsResource(pod *v1.Pod, name v1.ResourceName) bool { return requestsResource(pod, name) }
