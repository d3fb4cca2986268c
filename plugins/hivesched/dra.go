package hivesched

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
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"

	"github.com/hivesched/hivesched/apis/config"
	"github.com/hivesched/hivesched/plugins/dra"
)

// GPU claims (DRA; docs/plugin.md, "DRA"). A pod asks for leaf cells with
// ResourceClaims (or ResourceClaimTemplates) of a GPU DeviceClass instead of
// the leaf cell resource. hivesched decides its cells as for any pod and
// allocates its claims itself, with exactly the devices of those cells:
//
//   - the gang decision (PreFilter, in the scheduling loop) signals the
//     group's devices as an allocation in flight in the scheduler's shared
//     DRA manager, so that no DynamicResources of any profile of this
//     process picks them while the members bind;
//   - PreBind writes each GPU claim's finalizer, status.allocation (the
//     structured allocator's result on exactly those devices) and
//     status.reservedFor (the pod), before Bind binds the pod with a
//     placement record that lists the claims and their devices;
//   - the profile's DynamicResources runs wrapped (HiveSchedDRA,
//     draplugin.go) and never sees a GPU claim.
//
// The devices of every allocated claim are the core's claimed devices: a
// claimed leaf no group holds is taken (another allocator's claim, or a
// claim not released yet). A pod's cells are released only when the pod is
// gone and its GPU claims no longer hold their devices.

// draState is HiveSched's DRA side; nil when no GPU DeviceClass is
// configured.
type draState struct {
	cfg     dra.Config
	slices  *dra.Slices
	claims  *dra.Claims
	alloc   *dra.Allocator
	manager fwk.SharedDRAManager
	cs      kubernetes.Interface
	lister  resourcelisters.ResourceClaimLister

	mu sync.Mutex
	// signals: per group, the allocation in flight that holds its devices
	// for every allocator of the process while its members bind.
	signals map[string]types.UID
	seq     uint64
	// deferred: pods gone (deleted or finished) whose GPU claims still hold
	// their devices: their cells are released once the claims are.
	deferred map[types.UID]deferredPod
	// releasing: claims whose stale allocation is being cleared.
	releasing sets.Set[types.UID]
	// listed: the claims a recovery from the API server listed (the claim
	// informer is not started then), by namespace/name; nil otherwise.
	listed map[string]*resourceapi.ResourceClaim
	// awaited: claims (namespace/name) a pod's request waited for because
	// the scheduler had not seen them: when they appear, the pods that
	// name them are read again (onClaim).
	awaited sets.Set[string]
}

// setListed makes claim lookups read the listed claims (nil: the informer).
func (d *draState) setListed(claims []*resourceapi.ResourceClaim) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if claims == nil {
		d.listed = nil
		return
	}
	d.listed = make(map[string]*resourceapi.ResourceClaim, len(claims))
	for _, c := range claims {
		d.listed[c.Namespace+"/"+c.Name] = c
	}
}

// claimNamed reads a claim as the shared DRA manager has it (the informer's
// and the claims this process wrote), or from the recovery's list.
func (d *draState) claimNamed(namespace, name string) (*resourceapi.ResourceClaim, error) {
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

type deferredPod struct {
	pod     *v1.Pod
	deleted bool
}

// newDRA is the DRA side for args, nil without GPU classes or a DRA
// manager.
func newDRA(args *config.HiveSchedArgs, h fwk.Handle) *draState {
	cfg := dra.NewConfig(args.DRA.GPUDeviceClasses, args.DRA.Driver)
	if !cfg.Enabled() || h.SharedDRAManager() == nil {
		return nil
	}
	slices := dra.NewSlices(cfg.Driver)
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	return &draState{
		cfg:       cfg,
		slices:    slices,
		claims:    dra.NewClaims(slices),
		alloc:     dra.NewAllocator(slices, h.SharedDRAManager().DeviceClasses(), dynamicresources.AllocatorFeatures(fts)),
		manager:   h.SharedDRAManager(),
		cs:        h.ClientSet(),
		lister:    h.SharedInformerFactory().Resource().V1().ResourceClaims().Lister(),
		signals:   map[string]types.UID{},
		deferred:  map[types.UID]deferredPod{},
		releasing: sets.New[types.UID](),
		awaited:   sets.New[string](),
	}
}

// getClaim reads a claim as the profile's DynamicResources does (the
// shared DRA manager's assume cache: the informer's view and the claims
// written by this process).
//
// A claim the assume cache has not seen yet is read from the informer's
// store: the informer updates its store before it calls any handler, the
// assume cache is one of those handlers, so a handler of ours (a new claim
// re-reading the pods that wait for it) may run before it.
func (d *draState) getClaim(namespace, name string) (*resourceapi.ResourceClaim, error) {
	c, err := d.manager.ResourceClaims().Get(namespace, name)
	if (err != nil || c == nil) && d.lister != nil {
		return d.lister.ResourceClaims(namespace).Get(name)
	}
	return c, err
}

// podClaims are the pod's GPU claims and how many devices they ask for.
func (d *draState) podClaims(pod *v1.Pod) ([]dra.PodClaim, int64, error) {
	return d.cfg.GPUClaims(pod, func(namespace, name string) (*resourceapi.ResourceClaim, error) {
		c, err := d.getClaim(namespace, name)
		if err != nil || c == nil {
			d.mu.Lock()
			d.awaited.Insert(namespace + "/" + name)
			d.mu.Unlock()
		}
		return c, err
	})
}

// appeared reports (once) whether a pod's request waited for the claim.
func (d *draState) appeared(c *resourceapi.ResourceClaim) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := c.Namespace + "/" + c.Name
	if !d.awaited.Has(key) {
		return false
	}
	d.awaited.Delete(key)
	return true
}

// claimLeaves is podrequest's Lookups.Claims: a pod's leaf cells through
// its GPU claims. A pod that asks both ways is refused.
func (p *HiveSched) claimLeaves(pod *v1.Pod) (int64, bool, error) {
	claims, n, err := p.dra.podClaims(pod)
	if err != nil || n == 0 {
		return 0, false, err
	}
	if dra.RequestsResource(pod, p.resource) {
		names := make([]string, len(claims))
		for i, c := range claims {
			names[i] = c.Claim.Name
		}
		return 0, false, fmt.Errorf("pod asks for GPUs twice: through ResourceClaim %s (%d devices) and as %s in its containers' resources; ask one way: drop %s (the claims give the containers their devices), or drop the claims",
			strings.Join(names, ", "), n, p.resource, p.resource)
	}
	return n, true, nil
}

// hasGPUClaims is the cheap check: the pod names claims, and one of them
// is a GPU claim.
func (p *HiveSched) hasGPUClaims(pod *v1.Pod) bool {
	if p.dra == nil || len(pod.Spec.ResourceClaims) == 0 {
		return false
	}
	claims, _, err := p.dra.podClaims(pod)
	return err == nil && len(claims) > 0
}

// onSlice hands a ResourceSlice change to the slice index and the nodes'
// devices (health from device taints, claimed devices) to the core.
func (p *HiveSched) onSlice(logger klog.Logger, obj interface{}, deleted bool) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return
	}
	for _, node := range p.dra.slices.Update(s, deleted) {
		p.draNode(logger, node, true)
	}
}

// draNode hands a node's DRA inputs to the core: device health from its
// slices, devices its claims hold. freed: something may have gone free.
func (p *HiveSched) draNode(logger klog.Logger, node string, freed bool) {
	changed := p.devices.SetSliceHealth(logger, node, p.dra.slices.Health(node))
	changed = p.devices.SetClaimed(logger, node, p.dra.claims.Claimed(node)) || changed
	if changed {
		p.vcs.Changed()
		if freed {
			p.activateWaiting(logger, "")
		}
	}
}

// onClaim tracks a claim's devices; a claim that releases its devices lets
// the pods gone before it go (their cells), and a claim allocated by
// someone else is announced on the pods it is reserved for.
func (p *HiveSched) onClaim(logger klog.Logger, obj interface{}, deleted bool) {
	c, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	released := deleted || c.Status.Allocation == nil
	d := p.dra
	d.mu.Lock()
	nodes := d.claims.Update(c, deleted)
	var gone []deferredPod
	if released {
		for uid, dp := range d.deferred {
			if !d.holdsDevicesLocked(dp.pod) {
				gone = append(gone, dp)
				delete(d.deferred, uid)
			}
		}
	}
	d.mu.Unlock()
	for _, n := range nodes {
		p.draNode(logger, n, released)
	}
	for _, dp := range gone {
		logger.V(2).Info("GPU claims released: the pod's cells go", "pod", klog.KObj(dp.pod))
		p.recovery.Hold(func(recovered bool) { p.podChanged(logger, dp.pod, dp.deleted, recovered) })
	}
	if !released && p.recovery.Done() {
		p.announceForeignClaim(logger, c)
	}
	if !deleted && p.dra.appeared(c) {
		// Pods that came before their claim, or before the scheduler saw
		// it (PreEnqueue holds them until their request can be read), are
		// read again.
		p.rereadRefused(logger, c.Namespace, func(pod *v1.Pod) bool { return podNamesClaim(pod, c.Name) })
	}
}

// podNamesClaim: the pod names the claim, directly or as the claim made
// from one of its templates.
func podNamesClaim(pod *v1.Pod, claim string) bool {
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

// announceForeignClaim tells the pods a claim is reserved for, once, that
// hivesched counts its devices as taken: another allocator's claim on
// devices of hivesched's cells.
func (p *HiveSched) announceForeignClaim(logger klog.Logger, c *resourceapi.ResourceClaim) {
	f, ok := p.dra.claims.ForeignClaim(c.UID)
	if !ok || !p.dra.claims.Announce(c.UID) {
		return
	}
	msg := fmt.Sprintf("ResourceClaim %s, which hivesched did not allocate, holds %s of node %s: hivesched counts them as taken and places nothing on them until the claim releases them",
		f.Name, strings.Join(f.Devices, ", "), f.Node)
	logger.Info("a claim hivesched did not allocate holds devices of its cells: counted as taken", "claim", f.Name, "node", f.Node, "devices", f.Devices)
	lister := p.handle.SharedInformerFactory().Core().V1().Pods().Lister()
	for _, r := range f.Consumers {
		if r.Resource != "pods" {
			continue
		}
		ns, _, _ := strings.Cut(f.Name, "/")
		if pod, err := lister.Pods(ns).Get(r.Name); err == nil && pod.UID == r.UID {
			p.event(pod, v1.EventTypeNormal, "ForeignDevicesCounted", msg)
		}
	}
}

// holdsDevicesLocked: one of the pod's GPU claims still holds devices
// (it is allocated, as the claim tracker last saw it). d.mu is held.
func (d *draState) holdsDevicesLocked(pod *v1.Pod) bool {
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue
		}
		c, err := d.lister.ResourceClaims(pod.Namespace).Get(*name)
		if err != nil || !d.cfg.IsGPUClaim(c) {
			continue
		}
		if d.claims.Allocated(c.UID) && (dra.ReservedFor(c, pod.UID) || d.claims.Ours(c.UID)) {
			return true
		}
	}
	return false
}

// deferRelease reports whether a gone pod's cells wait for its GPU claims:
// it holds devices still, and is released when they are (onClaim).
func (p *HiveSched) deferRelease(pod *v1.Pod, deleted bool) bool {
	if p.dra == nil || len(pod.Spec.ResourceClaims) == 0 {
		return false
	}
	d := p.dra
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.holdsDevicesLocked(pod) {
		delete(d.deferred, pod.UID)
		return false
	}
	d.deferred[pod.UID] = deferredPod{pod: pod, deleted: deleted}
	return true
}
