package dra

import (
	"context"
	"fmt"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// GPU claims (docs/dra.md). A pod asks for leaf cells with ResourceClaims
// (or ResourceClaimTemplates) of a GPU DeviceClass instead of the leaf cell
// resource. hivesched decides its cells as for any pod and allocates its
// claims itself, with exactly the devices of those cells:
//
//   - the gang decision (PreFilter, in the scheduling loop) signals the
//     group's devices as an allocation in flight in the scheduler's shared
//     DRA manager (SignalGroup), so that no DynamicResources of any profile
//     of this process picks them while the members bind;
//   - PreBind writes each GPU claim's finalizer, status.allocation (the
//     structured allocator's result on exactly those devices) and
//     status.reservedFor (the pod) (AllocateClaims), before Bind binds the
//     pod with a placement record that lists the claims and their devices;
//   - the profile's DynamicResources runs wrapped (the plugin's
//     HiveSchedDRA) on a View of each pod and never sees a GPU claim.
//
// The devices of every allocated claim are the core's claimed devices: a
// claimed leaf no group holds is taken (another allocator's claim, or a
// claim not released yet). A pod's cells are released only when the pod is
// gone and its GPU claims no longer hold their devices (DeferRelease,
// ClaimChanged).

// State is hivesched's DRA side: the slice and claim indexes, the
// allocator, and what the binding path and the handlers keep between them
// (allocations in flight per group, pods whose cells wait for their claims,
// claims being released, claims a request waited for). One lock guards
// what is State's own; the indexes have theirs.
type State struct {
	cfg     Config
	slices  *Slices
	claims  *Claims
	alloc   *Allocator
	manager fwk.SharedDRAManager
	cs      kubernetes.Interface
	lister  resourcelisters.ResourceClaimLister
	pods    corelisters.PodLister
	nodes   corelisters.NodeLister

	mu sync.Mutex
	// signals: per group, the allocation in flight that holds its devices
	// for every allocator of the process while its members bind.
	signals map[string]types.UID
	seq     uint64
	// deferred: pods gone (deleted or finished) whose GPU claims still hold
	// their devices: their cells are released once the claims are.
	deferred map[types.UID]GonePod
	// releasing: claims whose stale allocation is being cleared.
	releasing sets.Set[types.UID]
	// listed: the claims a recovery from the API server listed (the claim
	// informer is not started then), by namespace/name; nil otherwise.
	listed map[string]*resourceapi.ResourceClaim
	// awaited: claims (namespace/name) a pod's request waited for because
	// the scheduler had not seen them: when they appear, the pods that
	// name them are read again (Appeared).
	awaited sets.Set[string]
}

// Inputs are what State reads and writes through.
type Inputs struct {
	// Manager is the scheduler's shared DRA manager (its assume cache and
	// allocations in flight, which every DynamicResources of the process
	// reads).
	Manager fwk.SharedDRAManager
	// Client writes claims.
	Client kubernetes.Interface
	// Claims, Pods and Nodes are the informers' listers.
	Claims resourcelisters.ResourceClaimLister
	Pods   corelisters.PodLister
	Nodes  corelisters.NodeLister
	// Features are the structured allocator's (DynamicResources').
	Features structured.Features
}

// GonePod is a pod gone (deleted, or finished: Deleted false) whose cells
// waited for its GPU claims to release their devices.
type GonePod struct {
	Pod     *v1.Pod
	Deleted bool
}

// NewState is the DRA side of the GPU classes and driver cfg.
func NewState(cfg Config, in Inputs) *State {
	slices := NewSlices(cfg.Driver)
	return &State{
		cfg:       cfg,
		slices:    slices,
		claims:    NewClaims(slices),
		alloc:     NewAllocator(slices, in.Manager.DeviceClasses(), in.Features),
		manager:   in.Manager,
		cs:        in.Client,
		lister:    in.Claims,
		pods:      in.Pods,
		nodes:     in.Nodes,
		signals:   map[string]types.UID{},
		deferred:  map[types.UID]GonePod{},
		releasing: sets.New[types.UID](),
		awaited:   sets.New[string](),
	}
}

// ReadFromList makes claim lookups of records (CheckRecord) read the
// claims a recovery listed from the API server; ReadFromInformer undoes it.
func (d *State) ReadFromList(claims []*resourceapi.ResourceClaim) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.listed = make(map[string]*resourceapi.ResourceClaim, len(claims))
	for _, c := range claims {
		d.listed[c.Namespace+"/"+c.Name] = c
	}
}

// ReadFromInformer makes claim lookups read the informer again.
func (d *State) ReadFromInformer() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.listed = nil
}

// claimNamed reads a claim as the shared DRA manager has it (the informer's
// and the claims this process wrote), or from the recovery's list.
func (d *State) claimNamed(namespace, name string) (*resourceapi.ResourceClaim, error) {
	d.mu.Lock()
	listed := d.listed
	d.mu.Unlock()
	if listed != nil {
		if c, ok := listed[namespace+"/"+name]; ok {
			return c, nil
		}
		return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
	}
	c, err := d.getClaim(namespace, name)
	if err != nil {
		// The claim informer may lag the pod informer (a bound pod seen
		// before its claim at start): asked, not assumed gone. Only
		// records that list a claim the cache lacks get here.
		return d.cs.ResourceV1().ResourceClaims(namespace).Get(context.TODO(), name, metav1.GetOptions{})
	}
	return c, err
}

// getClaim reads a claim as the profile's DynamicResources does (the
// shared DRA manager's assume cache: the informer's view and the claims
// written by this process).
//
// A claim the assume cache has not seen yet is read from the informer's
// store: the informer updates its store before it calls any handler, the
// assume cache is one of those handlers, so a handler of the plugin's (a
// new claim re-reading the pods that wait for it) may run before it.
func (d *State) getClaim(namespace, name string) (*resourceapi.ResourceClaim, error) {
	c, err := d.manager.ResourceClaims().Get(namespace, name)
	if (err != nil || c == nil) && d.lister != nil {
		return d.lister.ResourceClaims(namespace).Get(name)
	}
	return c, err
}

// podClaims are the pod's GPU claims and how many devices they ask for.
// A claim not seen yet is noted as awaited (Appeared).
func (d *State) podClaims(pod *v1.Pod) ([]PodClaim, int64, error) {
	return d.cfg.GPUClaims(pod, func(namespace, name string) (*resourceapi.ResourceClaim, error) {
		c, err := d.getClaim(namespace, name)
		if err != nil || c == nil {
			d.mu.Lock()
			d.awaited.Insert(namespace + "/" + name)
			d.mu.Unlock()
			// The claim may have come between the look-up and the mark:
			// its handler (Appeared) found no mark and re-read nothing.
			// The lister has it before that handler runs, so a second
			// look-up after the mark sees it, or the handler sees the
			// mark. (A mark left behind costs one needless re-read.)
			c, err = d.getClaim(namespace, name)
		}
		return c, err
	})
}

// Appeared reports (once) whether a pod's request waited for the claim.
func (d *State) Appeared(c *resourceapi.ResourceClaim) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := c.Namespace + "/" + c.Name
	if !d.awaited.Has(key) {
		return false
	}
	d.awaited.Delete(key)
	return true
}

// PodLeaves is podrequest's Lookups.Claims: a pod's leaf cells through its
// GPU claims (has: it has some). A pod that asks both ways (claims and the
// leaf cell resource) is refused.
func (d *State) PodLeaves(pod *v1.Pod, resource v1.ResourceName) (int64, bool, error) {
	claims, n, err := d.podClaims(pod)
	if err != nil || n == 0 {
		return 0, false, err
	}
	if RequestsResource(pod, resource) {
		names := make([]string, len(claims))
		for i, c := range claims {
			names[i] = c.Claim.Name
		}
		return 0, false, fmt.Errorf("pod asks for GPUs twice: through ResourceClaim %s (%d devices) and as %s in its containers' resources; ask one way: drop %s (the claims give the containers their devices), or drop the claims",
			strings.Join(names, ", "), n, resource, resource)
	}
	return n, true, nil
}

// HasGPUClaims is the cheap check: the pod names claims, and one of them is
// a GPU claim.
func (d *State) HasGPUClaims(pod *v1.Pod) bool {
	if len(pod.Spec.ResourceClaims) == 0 {
		return false
	}
	claims, _, err := d.podClaims(pod)
	return err == nil && len(claims) > 0
}

// View is the pod the profile's DynamicResources sees (Config.View).
func (d *State) View(pod *v1.Pod, leaf v1.ResourceName) *v1.Pod {
	return d.cfg.View(pod, leaf, d.getClaim)
}

// SliceChanged hands a ResourceSlice change to the slice index and returns
// the nodes whose devices changed.
func (d *State) SliceChanged(s *resourceapi.ResourceSlice, deleted bool) []string {
	return d.slices.Update(s, deleted)
}

// SliceHealth is the health of a node's devices from its slices' device
// taints, the core's input.
func (d *State) SliceHealth(node string) []cellcore.DeviceStatus { return d.slices.Health(node) }

// Claimed lists the node's leaves that an allocated claim or an allocation
// in flight holds, the core's input.
func (d *State) Claimed(node string) []cellcore.DeviceRef { return d.claims.Claimed(node) }

// Feed hands slices and claims to the indexes (recovery reads them before
// their handlers may have; updates are idempotent).
func (d *State) Feed(slices []*resourceapi.ResourceSlice, claims []*resourceapi.ResourceClaim) {
	for _, s := range slices {
		d.slices.Update(s, false)
	}
	d.mu.Lock()
	for _, c := range claims {
		d.claims.Update(c, false)
	}
	d.mu.Unlock()
}

// ClaimChanged tracks a claim's devices (added, changed, deleted). It
// returns the nodes whose claimed devices changed and, when the claim
// released its devices, the gone pods whose claims no longer hold any:
// their cells may go now.
func (d *State) ClaimChanged(c *resourceapi.ResourceClaim, deleted bool) (nodes []string, gone []GonePod) {
	released := deleted || c.Status.Allocation == nil
	d.mu.Lock()
	defer d.mu.Unlock()
	nodes = d.claims.Update(c, deleted)
	if released {
		for uid, dp := range d.deferred {
			if !d.holdsDevicesLocked(dp.Pod) {
				gone = append(gone, dp)
				delete(d.deferred, uid)
			}
		}
	}
	return nodes, gone
}

// AnnounceForeign returns, once per claim, a claim hivesched did not
// allocate that holds devices of leaf cells: its pods are to be told that
// hivesched counts those devices as taken.
func (d *State) AnnounceForeign(uid types.UID) (Foreign, bool) {
	f, ok := d.claims.ForeignClaim(uid)
	if !ok || !d.claims.Announce(uid) {
		return Foreign{}, false
	}
	return f, true
}

// ForeignOn names the claims hivesched did not allocate that hold devices
// on the nodes (Claims.ForeignOn).
func (d *State) ForeignOn(nodes []string, max int) ([]string, int) {
	return d.claims.ForeignOn(nodes, max)
}

// PodNamesClaim reports whether the pod names the claim, directly or as the
// claim made from one of its templates.
func PodNamesClaim(pod *v1.Pod, claim string) bool {
	for i := range pod.Spec.ResourceClaims {
		if n := pod.Spec.ResourceClaims[i].ResourceClaimName; n != nil && *n == claim {
			return true
		}
	}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil && *s.ResourceClaimName == claim {
			return true
		}
	}
	return false
}

// holdsDevicesLocked: one of the pod's GPU claims still holds devices
// (it is allocated, as the claim tracker last saw it). d.mu is held.
func (d *State) holdsDevicesLocked(pod *v1.Pod) bool {
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue
		}
		c, err := d.lister.ResourceClaims(pod.Namespace).Get(*name)
		if err != nil || !d.cfg.IsGPUClaim(c) {
			continue
		}
		if d.claims.Allocated(c.UID) && (ReservedFor(c, pod.UID) || d.claims.Ours(c.UID)) {
			return true
		}
	}
	return false
}

// DeferRelease reports whether a gone pod's cells wait for its GPU claims:
// it holds devices still, and is released when they are (ClaimChanged
// returns it).
func (d *State) DeferRelease(pod *v1.Pod, deleted bool) bool {
	if len(pod.Spec.ResourceClaims) == 0 {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.holdsDevicesLocked(pod) {
		delete(d.deferred, pod.UID)
		return false
	}
	d.deferred[pod.UID] = GonePod{Pod: pod, Deleted: deleted}
	return true
}
