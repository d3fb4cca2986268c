// Package dra is what hivesched needs of Dynamic Resource Allocation
// (resource.k8s.io/v1): which of a pod's ResourceClaims are GPU claims
// (hivesched allocates those itself, with exactly the devices of the leaf
// cells it decided), the devices of the nodes' ResourceSlices as leaf cells
// (slices.go), the devices other claims hold (claims.go), the allocation
// result of a pod's claims (allocate.go), the API writes that allocate,
// reserve and release a claim (write.go), and the view of a pod that the
// profile's DynamicResources plugin is given, without GPU claims (view.go).
// State (state.go) is the one component the plugin holds: those parts put
// together with what the plugin's handlers and extension points keep
// between them (allocations in flight per group in inflight.go; the
// binding path's checks and writes, and what recovery trusts, in
// bindpath.go). It reads informer caches and calls the API server only
// through write.go, from the binding path and background workers, and to
// read a claim a recovered record names that the cache lacks.
package dra

import (
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/hivesched/hivesched/plugins/podrequest"
)

// Config says which claims are GPU claims and whose devices are leaf cells.
type Config struct {
	// Classes are the GPU DeviceClasses (HiveSchedArgs.dra.gpuDeviceClasses).
	Classes sets.Set[string]
	// Driver is the DRA driver of the GPUs (HiveSchedArgs.dra.driver).
	Driver string
}

// NewConfig is the configuration of classes and driver.
func NewConfig(classes []string, driver string) Config {
	return Config{Classes: sets.New(classes...), Driver: driver}
}

// Enabled: some DeviceClass is a GPU class.
func (c Config) Enabled() bool { return c.Classes.Len() > 0 }

// IsGPUClaim reports whether any request (or subrequest) of the claim names
// a GPU class. The claim's spec is immutable, so the answer never changes.
func (c Config) IsGPUClaim(claim *resourceapi.ResourceClaim) bool {
	if claim == nil || !c.Enabled() {
		return false
	}
	for _, r := range claim.Spec.Devices.Requests {
		if r.Exactly != nil && c.Classes.Has(r.Exactly.DeviceClassName) {
			return true
		}
		for _, s := range r.FirstAvailable {
			if c.Classes.Has(s.DeviceClassName) {
				return true
			}
		}
	}
	return false
}

// ClaimDevices checks that hivesched can allocate a GPU claim as written and
// returns how many devices it asks for. hivesched chooses the devices (the
// cells it decided for the pod), so a claim must ask for a number of whole
// devices of GPU classes and nothing that would choose among them.
func (c Config) ClaimDevices(claim *resourceapi.ResourceClaim) (int64, error) {
	name := claim.Namespace + "/" + claim.Name
	if len(claim.Spec.Devices.Constraints) > 0 {
		return 0, fmt.Errorf("GPU claim %s has constraints: hivesched chooses the devices (the cells of the pod's placement, inside one node and as close as its cell types allow); drop spec.devices.constraints", name)
	}
	var n int64
	for _, r := range claim.Spec.Devices.Requests {
		if r.Exactly == nil {
			return 0, fmt.Errorf("GPU claim %s: request %q is a prioritized list (firstAvailable): hivesched chooses the devices itself; ask with exactly (deviceClassName %s and a count)", name, r.Name, c.classList())
		}
		e := r.Exactly
		switch {
		case !c.Classes.Has(e.DeviceClassName):
			return 0, fmt.Errorf("GPU claim %s: request %q asks for devices of class %s beside GPUs: put them in a claim of their own (a GPU claim has only requests of class %s)", name, r.Name, e.DeviceClassName, c.classList())
		case e.AllocationMode != "" && e.AllocationMode != resourceapi.DeviceAllocationModeExactCount:
			return 0, fmt.Errorf("GPU claim %s: request %q has allocationMode %s: ask for a count of GPUs (ExactCount)", name, r.Name, e.AllocationMode)
		case len(e.Selectors) > 0:
			return 0, fmt.Errorf("GPU claim %s: request %q has selectors: hivesched chooses the devices; drop them (annotation %s chooses the GPU model)", name, r.Name, podrequest.AnnotationLeafCellType)
		case e.AdminAccess != nil && *e.AdminAccess:
			return 0, fmt.Errorf("GPU claim %s: request %q asks for admin access, which hivesched does not allocate: use another scheduler for monitoring pods", name, r.Name)
		case e.Capacity != nil:
			return 0, fmt.Errorf("GPU claim %s: request %q asks for device capacity: hivesched allocates whole GPUs", name, r.Name)
		}
		count := e.Count
		if count == 0 {
			count = 1 // the API's default
		}
		if count < 0 {
			return 0, fmt.Errorf("GPU claim %s: request %q asks for %d devices", name, r.Name, count)
		}
		n += count
	}
	if n == 0 {
		return 0, fmt.Errorf("GPU claim %s asks for no device", name)
	}
	return n, nil
}

func (c Config) classList() string {
	return strings.Join(sets.List(c.Classes), " or ")
}

// ClaimGetter returns a claim from a cache (nil and an error if it is not
// there).
type ClaimGetter func(namespace, name string) (*resourceapi.ResourceClaim, error)

// PodClaim is one GPU claim of a pod.
type PodClaim struct {
	// Name is the entry's name in the pod's spec.resourceClaims (what its
	// containers' resources.claims name).
	Name  string
	Claim *resourceapi.ResourceClaim
	// Devices it asks for.
	Devices int64
}

// GPUClaims returns the pod's GPU claims in the order of its
// spec.resourceClaims, and how many devices they ask for together. Its
// error says what the pod waits for (podrequest.IsAwaiting: a claim not
// created yet, or not yet seen by the scheduler) or what to fix (a claim
// hivesched cannot allocate as written, a claim of another pod).
func (c Config) GPUClaims(pod *v1.Pod, get ClaimGetter) ([]PodClaim, int64, error) {
	if !c.Enabled() || len(pod.Spec.ResourceClaims) == 0 {
		return nil, 0, nil
	}
	var out []PodClaim
	var total int64
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, checkOwner, err := resourceclaim.Name(pod, pc)
		switch {
		case errors.Is(err, resourceclaim.ErrClaimNotFound):
			return nil, 0, podrequest.Awaiting(fmt.Sprintf("waiting for the ResourceClaim of pod claim %q (from ResourceClaimTemplate %s) to be created", pc.Name, derefOr(pc.ResourceClaimTemplateName, "")))
		case err != nil:
			return nil, 0, err
		case name == nil:
			continue // not needed (the template controller said so)
		}
		claim, err := get(pod.Namespace, *name)
		if err != nil || claim == nil {
			return nil, 0, podrequest.Awaiting(fmt.Sprintf("waiting for ResourceClaim %s/%s (pod claim %q)", pod.Namespace, *name, pc.Name))
		}
		if !c.IsGPUClaim(claim) {
			continue
		}
		if checkOwner {
			if err := resourceclaim.IsForPod(pod, claim, false); err != nil {
				if isPodGroupClaim(claim) {
					return nil, 0, podGroupClaimError(claim)
				}
				return nil, 0, fmt.Errorf("GPU claim: %v", err)
			}
		} else if isPodGroupClaim(claim) {
			return nil, 0, podGroupClaimError(claim)
		}
		if claim.DeletionTimestamp != nil {
			return nil, 0, podrequest.Awaiting(fmt.Sprintf("GPU claim %s/%s is being deleted", claim.Namespace, claim.Name))
		}
		n, err := c.ClaimDevices(claim)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, PodClaim{Name: pc.Name, Claim: claim, Devices: n})
		total += n
	}
	return out, total, nil
}

// isPodGroupClaim: the claim was created for a Workload API PodGroup
// (DRAWorkloadResourceClaims), or is reserved for one.
func isPodGroupClaim(claim *resourceapi.ResourceClaim) bool {
	if ref := metav1.GetControllerOfNoCopy(claim); ref != nil && ref.Kind == "PodGroup" {
		return true
	}
	for _, r := range claim.Status.ReservedFor {
		if r.Resource == "podgroups" {
			return true
		}
	}
	return false
}

func podGroupClaimError(claim *resourceapi.ResourceClaim) error {
	return fmt.Errorf("GPU claim %s/%s is a claim of a whole PodGroup (DRAWorkloadResourceClaims): one set of devices for all its pods, but hivesched gives each member of a gang its own cells, on its own node; give the pods a ResourceClaimTemplate (one claim per pod) instead of the PodGroup's resourceClaims", claim.Namespace, claim.Name)
}

func derefOr(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}
