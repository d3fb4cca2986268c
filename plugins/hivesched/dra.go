package hivesched

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

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
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/dra"
	"github.com/hivesched/hivesched/plugins/placement"
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
func (d *draState) getClaim(namespace, name string) (*resourceapi.ResourceClaim, error) {
	return d.manager.ResourceClaims().Get(namespace, name)
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

// beforeDecision runs before the core decides a group (in the scheduling
// loop): allocations in flight of groups that no longer hold their cells
// go, and the stale claims of the group's members are released.
func (p *HiveSched) beforeDecision(ctx context.Context, logger klog.Logger, group string) {
	p.dropStaleSignals()
	for _, pod := range p.groups.Pods(group) {
		if pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil {
			p.releaseStaleClaims(ctx, logger, pod, nil)
		}
	}
}

// notePending hands the core the devices the profile's DynamicResources
// just allocated in memory for the claims of a pod (its Reserve): they are
// claimed until the informer shows them written, or the pod is unreserved
// (drop). Called by HiveSchedDRA in the scheduling loop, so the next
// decision sees them.
func (p *HiveSched) notePending(logger klog.Logger, pod *v1.Pod, drop bool) {
	d := p.dra
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue
		}
		c, err := d.getClaim(pod.Namespace, *name)
		if err != nil {
			continue
		}
		var alloc *resourceapi.AllocationResult
		if !drop {
			alloc = d.manager.ResourceClaims().GetPendingAllocation(c.UID)
		}
		for _, n := range d.claims.SetPending(c.UID, alloc) {
			p.draNode(logger, n, drop)
		}
	}
}

// signalGroup makes a placed group's devices an allocation in flight in
// the shared DRA manager, under a claim UID of its own: every
// DynamicResources of this process leaves them alone until the group's
// claims are written (and assumed), or it no longer holds them. The
// manager looks a signalled claim up by namespace and name, so the entry
// is a copy of a real GPU claim of the group (anchor) with that UID.
func (p *HiveSched) signalGroup(logger klog.Logger, group string, pods []cellcore.PodPlacement, anchor *resourceapi.ResourceClaim) {
	d := p.dra
	var results []resourceapi.DeviceRequestAllocationResult
	for _, pp := range pods {
		for _, i := range pp.LeafCellIndices {
			if dev, ok := d.slices.Device(pp.Node, i); ok {
				results = append(results, resourceapi.DeviceRequestAllocationResult{Request: "hivesched", Driver: d.cfg.Driver, Pool: dev.Pool, Device: dev.Name})
			}
		}
	}
	p.dropSignal(group)
	if len(results) == 0 {
		return
	}
	d.mu.Lock()
	d.seq++
	uid := types.UID(fmt.Sprintf("hivesched.io/group/%s/%d", group, d.seq))
	d.mu.Unlock()
	c := anchor.DeepCopy()
	c.UID = uid
	c.Status = resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}}
	if err := d.manager.ResourceClaims().SignalClaimPendingAllocation(uid, c); err != nil {
		logger.Error(err, "signalling a group's devices in flight", "group", group)
		return
	}
	d.mu.Lock()
	d.signals[group] = uid
	d.mu.Unlock()
}

// dropSignal removes a group's allocation in flight.
func (p *HiveSched) dropSignal(group string) {
	d := p.dra
	d.mu.Lock()
	uid, ok := d.signals[group]
	delete(d.signals, group)
	d.mu.Unlock()
	if ok {
		d.manager.ResourceClaims().MaybeRemoveClaimPendingAllocation(uid, true)
	}
}

// dropStaleSignals removes the allocations in flight of groups that no
// longer hold their cells, or whose members are all bound (their claims
// are written).
func (p *HiveSched) dropStaleSignals() {
	d := p.dra
	d.mu.Lock()
	groups := make([]string, 0, len(d.signals))
	for g := range d.signals {
		groups = append(groups, g)
	}
	d.mu.Unlock()
	for _, g := range groups {
		st, ok := p.core.AffinityGroupState(g)
		if !ok || (st != cellcore.AGAllocated && st != cellcore.AGBeingPreempted) || p.groups.BoundCount(g) >= p.groups.MemberCount(g) {
			p.dropSignal(g)
		}
	}
}

// runSignalJanitor drops stale allocations in flight of an idle scheduler.
func (p *HiveSched) runSignalJanitor(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.dropStaleSignals()
		}
	}
}

// releaseStaleClaims clears, in the background, the allocations of an
// unbound pod's GPU claims that are not the ones its placement pp (nil: it
// has none now) needs and that nobody else uses: hivesched's own from an
// earlier placement (rolled back, or written before a restart), or one
// written by anyone for this unbound pod (hivesched does not take an
// allocation it did not make). It returns what the pod waits for ("" if
// nothing: no stale allocation), or an error for a claim used by others.
func (p *HiveSched) releaseStaleClaims(ctx context.Context, logger klog.Logger, pod *v1.Pod, want map[types.UID]bool) (string, error) {
	claims, _, err := p.dra.podClaims(pod)
	if err != nil {
		return "", nil // PreFilter says so
	}
	var waits []string
	for _, pc := range claims {
		c := pc.Claim
		if c.Status.Allocation == nil || want[c.UID] {
			continue
		}
		for _, r := range c.Status.ReservedFor {
			if r.UID != pod.UID {
				return "", fmt.Errorf("GPU claim %s/%s is allocated and reserved for %s %s: hivesched allocates a GPU claim itself, for one pod, and does not take an allocation it did not make; give this pod a claim of its own (a ResourceClaimTemplate)",
					c.Namespace, c.Name, r.Resource, r.Name)
			}
		}
		waits = append(waits, fmt.Sprintf("%s/%s (%s)", c.Namespace, c.Name, strings.Join(dra.DeviceIDs(c.Status.Allocation, ""), ", ")))
		p.releaseClaim(ctx, logger, pod, c)
	}
	if len(waits) == 0 {
		return "", nil
	}
	return fmt.Sprintf("waiting for GPU claim %s to release an allocation hivesched does not hold for this placement (an earlier placement's, or one it did not make): it is being released, then the pod is placed", strings.Join(waits, ", ")), nil
}

// releaseClaim clears a stale allocation of an unbound pod's claim in the
// background (once at a time per claim): only while the claim still holds
// that allocation, reserved for nobody but the pod, and the pod is unbound.
func (p *HiveSched) releaseClaim(ctx context.Context, logger klog.Logger, pod *v1.Pod, c *resourceapi.ResourceClaim) {
	d := p.dra
	d.mu.Lock()
	if d.releasing.Has(c.UID) {
		d.mu.Unlock()
		return
	}
	d.releasing.Insert(c.UID)
	d.mu.Unlock()
	stale := c.Status.Allocation.DeepCopy()
	podLister := p.handle.SharedInformerFactory().Core().V1().Pods().Lister()
	go func() {
		defer func() {
			d.mu.Lock()
			d.releasing.Delete(c.UID)
			d.mu.Unlock()
		}()
		err := dra.Release(context.WithoutCancel(ctx), d.cs, c.Namespace, c.Name, func(now *resourceapi.ResourceClaim) bool {
			if now.UID != c.UID || !dra.SameDevices(now.Status.Allocation, stale) {
				return false
			}
			for _, r := range now.Status.ReservedFor {
				if r.UID != pod.UID {
					return false
				}
			}
			cur, err := podLister.Pods(pod.Namespace).Get(pod.Name)
			return err != nil || cur.UID != pod.UID || cur.Spec.NodeName == ""
		})
		if err != nil {
			logger.Error(err, "releasing a stale GPU claim allocation", "claim", klog.KObj(c), "pod", klog.KObj(pod))
			return
		}
		logger.Info("released a GPU claim's allocation that hivesched does not hold for its unbound pod", "claim", klog.KObj(c), "pod", klog.KObj(pod), "devices", dra.DeviceIDs(stale, ""))
		d.claims.SetOurs(c.UID, false)
	}()
}

// checkClaims is PreFilter's check of a placed member with GPU claims: the
// node's slices name a device for every leaf cell of its slot, and its
// claims hold no allocation but the one for this slot (a retried binding).
// It returns what the pod waits for or an error to refuse it with.
func (p *HiveSched) checkClaims(ctx context.Context, pod *v1.Pod, pp cellcore.PodPlacement) (string, error) {
	claims, _, err := p.dra.podClaims(pod)
	if err != nil || len(claims) == 0 {
		return "", err
	}
	devs, err := p.dra.alloc.DeviceNames(pp.Node, pp.LeafCellIndices)
	if err != nil {
		return "", nil // Filter rejects the node (PlacementRejected)
	}
	mine := sets.New[string]()
	for _, dv := range devs {
		mine.Insert(p.dra.cfg.Driver + "/" + dv.Pool + "/" + dv.Name)
	}
	keep := map[types.UID]bool{}
	for _, pc := range claims {
		c := pc.Claim
		if c.Status.Allocation == nil {
			continue
		}
		ids := dra.DeviceIDs(c.Status.Allocation, "")
		if p.dra.claims.Ours(c.UID) && mine.HasAll(ids...) && dra.ReservedFor(c, pod.UID) {
			keep[c.UID] = true // written for this placement; its binding is retried
		}
	}
	return p.releaseStaleClaims(ctx, klog.FromContext(ctx), pod, keep)
}

// allocateClaims is PreBind's work for a pod with GPU claims: each claim's
// allocation (exactly the devices of the pod's cells), written and
// reserved for the pod before it is bound, and assumed in the shared DRA
// manager so that every allocator of the process sees it at once. It
// returns the claims as the pod's placement record lists them.
func (p *HiveSched) allocateClaims(ctx context.Context, pod *v1.Pod, pp cellcore.PodPlacement) ([]placement.ClaimRecord, error) {
	d := p.dra
	claims, _, err := d.podClaims(pod)
	if err != nil {
		return nil, err
	}
	if len(claims) == 0 {
		return nil, nil
	}
	node, err := p.handle.SharedInformerFactory().Core().V1().Nodes().Lister().Get(pp.Node)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", pp.Node, err)
	}
	objs := make([]*resourceapi.ResourceClaim, len(claims))
	for i, c := range claims {
		objs[i] = c.Claim
	}
	results, err := d.alloc.Allocate(ctx, node, pp.LeafCellIndices, objs)
	if err != nil {
		return nil, err
	}
	recs := make([]placement.ClaimRecord, len(claims))
	for i, c := range objs {
		// Nobody else may hold these devices: a claim the informer shows,
		// or one written by another scheduler since the decision.
		var ids []int32
		for _, r := range results[i].Devices.Results {
			if _, idx, ok := d.slices.Leaf(r.Pool, r.Device); ok {
				ids = append(ids, idx)
			}
		}
		if others := d.claims.Holders(pp.Node, ids, c.UID); len(others) > 0 {
			return nil, fmt.Errorf("devices hivesched chose for GPU claim %s/%s are allocated in other claims: %s", c.Namespace, c.Name, strings.Join(others, ", "))
		}
		d.claims.SetOurs(c.UID, true)
		written, err := dra.Allocate(ctx, d.cs, c, &results[i], pod)
		if err != nil {
			if errors.Is(err, dra.ErrAllocatedElsewhere) || apierrors.IsNotFound(err) {
				d.claims.SetOurs(c.UID, false)
			}
			return nil, fmt.Errorf("allocating GPU claim %s/%s: %w", c.Namespace, c.Name, err)
		}
		if err := d.manager.ResourceClaims().AssumeClaimAfterAPICall(written); err != nil {
			klog.FromContext(ctx).V(2).Info("claim not assumed (the informer has a newer one)", "claim", klog.KObj(written), "err", err)
		}
		recs[i] = placement.ClaimRecord{Name: written.Name, UID: string(written.UID), Devices: dra.DeviceIDs(written.Status.Allocation, "")}
	}
	return recs, nil
}

// trustedRecord is a bound pod's placement record as recovery and adoption
// trust it: signed for the pod, and, if the pod has GPU claims, listing
// each of them with exactly the devices the claim holds now and reserved
// for the pod. Anything else is an allocation hivesched did not make (or
// no longer holds): the pod's cells are not hivesched's, and the claim's
// devices count as taken.
func (p *HiveSched) trustedRecord(pod *v1.Pod) (placement.Record, error) {
	rec, err := p.signer.Trusted(pod)
	if err != nil || p.dra == nil {
		return rec, err
	}
	byName := map[string]placement.ClaimRecord{}
	for _, c := range rec.Claims {
		byName[c.Name] = c
	}
	seen := 0
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue
		}
		c, err := p.dra.claimNamed(pod.Namespace, *name)
		if err != nil {
			if r, listed := byName[*name]; listed {
				return rec, fmt.Errorf("its GPU claim %s/%s, allocated by hivesched (%s), is gone", pod.Namespace, r.Name, strings.Join(r.Devices, ", "))
			}
			continue
		}
		if !p.dra.cfg.IsGPUClaim(c) {
			continue
		}
		r, listed := byName[c.Name]
		got := dra.DeviceIDs(c.Status.Allocation, "")
		switch {
		case !listed:
			return rec, fmt.Errorf("its GPU claim %s/%s holds %s, which its placement record does not list: hivesched did not allocate them", c.Namespace, c.Name, orNone(got))
		case string(c.UID) != r.UID || strings.Join(got, ",") != strings.Join(r.Devices, ","):
			return rec, fmt.Errorf("its GPU claim %s/%s holds %s, not the %s hivesched allocated", c.Namespace, c.Name, orNone(got), strings.Join(r.Devices, ", "))
		case !dra.ReservedFor(c, pod.UID):
			return rec, fmt.Errorf("its GPU claim %s/%s is not reserved for it", c.Namespace, c.Name)
		}
		seen++
	}
	if seen != len(rec.Claims) {
		return rec, fmt.Errorf("its placement record lists %d GPU claims, the pod uses %d", len(rec.Claims), seen)
	}
	return rec, nil
}

func orNone(ids []string) string {
	if len(ids) == 0 {
		return "no device"
	}
	return strings.Join(ids, ", ")
}

// claimsRecovered marks the claims of recovered pods as hivesched's.
func (p *HiveSched) claimsRecovered(pods []*v1.Pod) {
	if p.dra == nil {
		return
	}
	for _, pod := range pods {
		if !p.coreHolds(pod) {
			continue
		}
		rec, err := p.signer.Trusted(pod)
		if err != nil {
			continue
		}
		for _, c := range rec.Claims {
			p.dra.claims.SetOurs(types.UID(c.UID), true)
		}
	}
}

// foreignOn names the pods and claims hivesched did not place that hold
// devices on the nodes (the VC status' CellsLost condition).
type foreignOn struct{ p *HiveSched }

func (f foreignOn) ForeignPodsOn(nodes []string, max int) ([]string, int) {
	names, more := f.p.devices.ForeignPodsOn(nodes, max)
	if f.p.dra == nil {
		return names, more
	}
	claims, cmore := f.p.dra.claims.ForeignOn(nodes, max)
	names = append(names, claims...)
	more += cmore
	if len(names) > max {
		more += len(names) - max
		names = names[:max]
	}
	return names, more
}

// draFilter rejects a node that cannot back a GPU-claim pod's slot: the
// node publishes no (complete) ResourceSlice with a device for each of its
// leaf cells. It reads the slice index only.
func (p *HiveSched) draFilter(s *cycleState, node string) *fwk.Status {
	if _, err := p.dra.alloc.DeviceNames(node, s.indices); err != nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	return nil
}
