// Package hivesched is the HiveSched scheduling-framework plugin: a thin layer
// that translates pods, nodes and VirtualClusters into calls on the cell core
// (plugins/cellcore) and the core's decisions back into scheduling results.
//
// Extension points and the seed's events (docs/plugin.md has the table):
//
//	PreEnqueue  gang gate: wait until every member pod of the group exists
//	QueueSort   group priority, then older group, then group name
//	PreFilter   core.Schedule: AG e0 (placed), e1 (preempt) or wait; e2 for a
//	            Preempting group whose victims are gone; narrows to one node
//	Filter      only the chosen node, and only while it is healthy
//	PostFilter  deletes every pod of each victim group (whole gangs, in the
//	            background, retried) and nominates the node; victims'
//	            deletions drive cell e9, AG e4
//	Reserve     records the member; Unreserve rolls a never-bound gang back (x1)
//	Permit      waits until all members are reserved, then allows them together
//	Bind        binds the pod with its placement annotations in one write
//	            (persisted for recovery, ec), whole gangs at a time through
//	            the bind gate; PreBind patches them instead when another
//	            binder runs first; a failed binding retries on the same
//	            cells, and maxBindAttempts failures give the placement up
//	PostBind    forgets the member's binding failures
package hivesched

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/topologyaware"

	"github.com/hivesched/hivesched/apis/config"
	"github.com/hivesched/hivesched/apis/config/validation"
	"github.com/hivesched/hivesched/apis/generated/clientset/versioned"
	"github.com/hivesched/hivesched/plugins/affinitygroups"
	"github.com/hivesched/hivesched/plugins/binding"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/cellspec"
	"github.com/hivesched/hivesched/plugins/devices"
	"github.com/hivesched/hivesched/plugins/groupindex"
	"github.com/hivesched/hivesched/plugins/inspect"
	"github.com/hivesched/hivesched/plugins/internal/english"
	"github.com/hivesched/hivesched/plugins/metrics"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/plugins/podrequest"
	"github.com/hivesched/hivesched/plugins/recovery"
	"github.com/hivesched/hivesched/plugins/virtualclusters"
)

// Name is the plugin's name in KubeSchedulerConfiguration.
const Name = "HiveSched"

const stateKey fwk.StateKey = Name

// HiveSched is the plugin.
type HiveSched struct {
	handle        fwk.Handle
	core          *cellcore.Core
	resource      v1.ResourceName
	permitTimeout time.Duration
	statusEvery   time.Duration
	schedulerName string // pods of other schedulers are not ours
	vcClient      versioned.Interface
	groups        *groupindex.Index
	vcs           *virtualclusters.Registry
	cellTypes     cellspec.CellTypes      // what the cell type hierarchy says of a request
	evictor       *binding.Evictor        // deletes the pods of preempted groups
	deleter       binding.Deleter         // deletes pods with at most the victims' grace period
	records       *placement.RecordWriter // placement records of downgraded groups
	signer        *placement.Signer
	devices       *devices.Tracker        // device health and foreign pods' devices, per node
	ags           *affinitygroups.Tracker // AffinityGroup lifecycles and their writer
	pgs           *podGroups              // scheduler-plugins' PodGroups, nil without the CRD
	wl            *workloadAPI            // Workload API PodGroups, nil without GenericWorkload
	// resolver reads pods' requests in every form (set with the informers
	// it reads from).
	resolver *podrequest.Resolver
	// holds: groups placed by a pod-group cycle, not yet confirmed by its
	// binding step (podgroupcycle.go).
	holds *groupHolds
	// topology places the pod groups hivesched does not schedule, as the
	// in-tree TopologyPlacementGenerator would (only one placement
	// generator runs per profile); nil without TopologyAwareWorkloadScheduling.
	topology fwk.PlacementGeneratePlugin

	// recovery rebuilds the allocations once (ensureRecovered), ordered
	// with the pod event handler.
	recovery recovery.Gate

	bindOrder sync.Once // decides ownBind on first use
	ownBind   bool      // HiveSched's Bind runs first: it writes the placement

	// bindGate paces the binding calls by whole gangs (nil: no limit).
	bindGate *binding.Gate
	// bindRetries counts binding failures per group (maxBindAttempts);
	// bindEvictor deletes the bound members of a placement given up.
	bindRetries *binding.Retries
	bindEvictor *binding.Evictor
}

var (
	_ fwk.PreEnqueuePlugin  = &HiveSched{}
	_ fwk.QueueSortPlugin   = &HiveSched{}
	_ fwk.PreFilterPlugin   = &HiveSched{}
	_ fwk.FilterPlugin      = &HiveSched{}
	_ fwk.PostFilterPlugin  = &HiveSched{}
	_ fwk.ReservePlugin     = &HiveSched{}
	_ fwk.PermitPlugin      = &HiveSched{}
	_ fwk.PreBindPlugin     = &HiveSched{}
	_ fwk.BindPlugin        = &HiveSched{}
	_ fwk.PostBindPlugin    = &HiveSched{}
	_ fwk.EnqueueExtensions = &HiveSched{}

	_ fwk.PodGroupPostFilterPlugin = &HiveSched{}
	_ fwk.PlacementGeneratePlugin  = &HiveSched{}
	_ fwk.SignPlugin               = &HiveSched{}
)

// Name returns the plugin name.
func (p *HiveSched) Name() string { return Name }

// New builds the cell core from the plugin args, reads the placement signing
// key, and starts the informers and the VC status writer. The allocations of
// running pods are recovered before any scheduling: here, or with leader
// election when this process starts leading (ensureRecovered).
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.HiveSchedArgs)
	if !ok {
		return nil, fmt.Errorf("%s: args of type %T, want *HiveSchedArgs (is apis/config/scheme imported?)", Name, obj)
	}
	if err := validation.ValidateHiveSchedArgs(nil, args); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	core, err := cellcore.New(cellspec.Config(args.PhysicalCluster))
	if err != nil {
		return nil, fmt.Errorf("%s: physical cluster: %w", Name, err)
	}
	kc := rest.CopyConfig(h.KubeConfig())
	kc.ContentType = "application/json" // CRD types have no protobuf
	kc.AcceptContentTypes = "application/json"
	vcClient, err := versioned.NewForConfig(kc)
	if err != nil {
		return nil, err
	}
	agClient, err := affinitygroups.NewClient(kc)
	if err != nil {
		return nil, err
	}
	p := &HiveSched{
		handle:        h,
		core:          core,
		resource:      v1.ResourceName(args.LeafCellResourceName),
		permitTimeout: time.Duration(args.PermitWaitingTimeSeconds) * time.Second,
		statusEvery:   time.Duration(args.StatusUpdateIntervalSeconds) * time.Second,
		vcClient:      vcClient,
		groups:        groupindex.New(v1.ResourceName(args.LeafCellResourceName)),
		cellTypes:     cellspec.NewCellTypes(args.PhysicalCluster),
		devices:       devices.New(core, v1.ResourceName(args.LeafCellResourceName)),
		bindGate:      binding.NewGate(int(args.MaxBindingPods)),
		bindRetries:   binding.NewRetries(int(args.MaxBindAttempts)),
		holds:         newGroupHolds(),
	}
	if fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate); fts.EnableTopologyAwareWorkloadScheduling {
		if p.topology, err = topologyaware.New(ctx, nil, h, fts); err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
	}
	p.vcs = virtualclusters.New(virtualclusters.Config{Core: core, Client: vcClient, Every: p.statusEvery, Recovered: p.recovery.Done, Foreign: p.devices})
	p.ags = affinitygroups.New(affinitygroups.Config{Writes: args.AffinityGroupStatus, Client: agClient, Pods: h.ClientSet(), Core: core,
		Members: p.groups, VirtualClusters: p.vcs, Every: p.statusEvery, Retention: time.Duration(args.AffinityGroupRetentionSeconds) * time.Second,
		Recovered: p.recovery.Done, TimedOut: p.pendingTimedOut})
	p.cellTypes.WarnSkuTypes(klog.FromContext(ctx), args.PhysicalCluster)
	p.deleter = binding.NewDeleter(h.ClientSet(), args.VictimGracePeriodSeconds)
	p.evictor = binding.NewEvictor(ctx, p.deleter.Delete, p.stillVictim)
	p.bindEvictor = binding.NewEvictor(ctx, p.deleter.Delete, p.stillGivenUp)
	if fw, ok := h.(interface{ ProfileName() string }); ok {
		p.schedulerName = fw.ProfileName()
	}
	if p.signer, err = placement.LoadSigner(ctx, h.ClientSet()); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	pods := h.SharedInformerFactory().Core().V1().Pods()
	p.records = placement.NewDowngradeWriter(h.ClientSet(), pods.Lister(), pods.Informer().HasSynced, p.signer, p.groupDowngraded)
	// Fail at start, not at the first pod, when the CRD is missing.
	if _, err := vcClient.HiveschedV1alpha1().VirtualClusters().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		p.records.ShutDown()
		return nil, fmt.Errorf("%s: listing virtual clusters (is the CRD installed?): %w", Name, err)
	}
	if _, err := vcClient.HiveschedV1alpha1().AffinityGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		p.records.ShutDown()
		return nil, fmt.Errorf("%s: listing affinity groups (is the CRD manifests/crds/hivesched.io_affinitygroups.yaml installed?): %w", Name, err)
	}
	if p.pgs, err = newPodGroups(kc); err != nil {
		p.records.ShutDown()
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if !awaitLeadership.Load() {
		// The only scheduler (no leader election): nothing is placed
		// elsewhere meanwhile, so the state is rebuilt before any
		// scheduling, from the API server (the informers are not started).
		if err := p.recoverFromAPI(ctx); err != nil {
			p.records.ShutDown()
			return nil, fmt.Errorf("%s: recovering allocations: %w", Name, err)
		}
	} else {
		go p.recovery.WhenLeading(ctx, p.ensureRecovered)
	}
	if args.InspectBindAddress != "" {
		srv := inspect.New(inspect.Config{Core: core, Groups: p.groups, VirtualClusters: p.vcs, Pods: h.SharedInformerFactory().Core().V1().Pods().Lister(),
			Ours: p.ours, Scheduler: p.schedulerName})
		if _, err := srv.Start(ctx, args.InspectBindAddress); err != nil {
			p.records.ShutDown()
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
	}
	metrics.Register(p.schedulerName, core, p.recovery.Done, ctx.Done())
	p.startInformers(ctx)
	go p.records.Run(ctx)
	go p.vcs.Run(ctx)
	go p.runHoldJanitor(ctx)
	go p.ags.Run(ctx)
	return p, nil
}

// ours: is the pod this scheduler's? A bound pod is if and only if a
// hivesched bound it, whatever profile name placed it: its placement record
// is signed for it (a pod created with spec.nodeName, or bound by another
// scheduler, never counts as hivesched's allocation, whatever its
// annotations say). A pod to schedule is if it names this profile.
//
// A pod tracked from its record stays ours until it is gone: it is keyed by
// UID, and removing its annotations later must not free the cells it runs on.
func (p *HiveSched) ours(pod *v1.Pod) bool {
	if p.groups.IsPinned(pod) {
		return true
	}
	if pod.Spec.NodeName != "" {
		return p.signer.Verify(pod)
	}
	return p.schedulerName == "" || pod.Spec.SchedulerName == p.schedulerName
}

// request returns the pod's parsed request (cached per pod version).
func (p *HiveSched) request(pod *v1.Pod) (*podrequest.Request, error) {
	return p.groups.Request(pod)
}

// --- PreEnqueue and QueueSort ---

// PreEnqueue keeps a gang's pods out of the active queue until every member
// pod exists, so that the group is decided once with all members at hand.
func (p *HiveSched) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	req, err := p.request(pod)
	if err != nil || req == nil {
		return nil // plain pods pass; bad specs are reported by PreFilter
	}
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

// --- PreFilter, Filter, PostFilter ---

// cycleState is what PreFilter decided for the pod.
type cycleState struct {
	group   string
	node    string // the pod's node when placed
	preempt *cellcore.Decision
	leaves  int32
	// rejected: PreFilter refused the pod (bad request, or the group
	// waits); its message is the whole story, see PostFilter.
	rejected bool
	// bindErr: the binding cycle failed once the pod was on its way to
	// its node (Bind's call, PreBind's placement patch, or the profile's
	// binder after PreBind); Unreserve then retries it on the same cells
	// (bindretry.go). Only the pod's own binding goroutine touches it.
	bindErr error
}

func (s *cycleState) Clone() fwk.StateData { return s }

// reject records in the cycle state that PreFilter refused the pod with
// msg (PostFilter then adds nothing to it) and returns the status.
func reject(state fwk.CycleState, code fwk.Code, msg string) (*fwk.PreFilterResult, *fwk.Status) {
	state.Write(stateKey, &cycleState{rejected: true})
	return nil, fwk.NewStatus(code, msg)
}

// PreFilter asks the core for the group's placement. The first member's call
// decides for the whole group (AG e0 or e1); the others find their slot.
func (p *HiveSched) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	req, err := p.request(pod)
	if err == nil && req != nil {
		err = p.cellTypes.CheckLeafCellType(req.Group.LeafCellType)
	}
	if err != nil {
		p.event(pod, v1.EventTypeWarning, "InvalidSchedulingSpec", err.Error())
		return reject(state, fwk.UnschedulableAndUnresolvable, err.Error())
	}
	if req == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	p.noteDisruptionMode(pod)
	if err := p.ensureRecovered(ctx); err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("recovering allocations: %w", err))
	}
	pgCycle := rootCycle(state.GetPodGroupSchedulingCycle())
	p.releaseOtherCycles(klog.FromContext(ctx), pgCycle)
	name := req.Group.Name
	if msg := p.ags.Ended(name, pod); msg != "" {
		return reject(state, fwk.UnschedulableAndUnresolvable, msg)
	}
	agState, hasGroup := p.core.AffinityGroupState(name)
	// Every member is admitted as a new group is, but one that takes cells
	// its running group already holds (a member of the placement being
	// bound, or the replacement of a member that is gone): refusing it would
	// leave a gang partly bound. A member that needs new cells (one that was
	// not running when its group was recovered) binds more of the VC, so its
	// namespace must still be allowed and the VC Active.
	if !hasGroup || agState == cellcore.AGPending || agState == cellcore.AGPreempting || !p.core.JoinsPlacement(name, podrequest.PodKey(pod), req.LeafCellNumber) {
		if reason := p.vcs.Admits(req.Group.VirtualCluster, pod.Namespace); reason != "" {
			p.event(pod, v1.EventTypeWarning, "VirtualClusterRefused", reason)
			p.ags.Refuse(name, "VirtualClusterRefused", reason)
			return reject(state, fwk.UnschedulableAndUnresolvable, reason)
		}
	}
	// A placement given up after binding failures goes back to Pending once
	// its bound members are gone (bindretry.go).
	if hasGroup && agState == cellcore.AGAllocated {
		rolledBack, st := p.givenUpPreFilter(klog.FromContext(ctx), state, name)
		if st != nil {
			return nil, st
		}
		if rolledBack {
			agState = cellcore.AGPending
			if have, want := p.groups.MemberCount(name), req.TotalPods(); have < want {
				// Its bound members were deleted: placed anew once its
				// owner has created them again (PreEnqueue holds it).
				return reject(state, fwk.UnschedulableAndUnresolvable,
					fmt.Sprintf("waiting for the members of affinity group %s: %d of %d pods exist", name, have, want))
			}
		}
	}
	// A group allocated long ago whose pods never bound (another plugin keeps
	// rejecting its nodes) gives its cells back and is placed again.
	if hasGroup && agState == cellcore.AGAllocated && p.groups.StaleAllocation(name, p.permitTimeout) {
		if err := p.core.RollbackAffinityGroup(name); err == nil {
			klog.FromContext(ctx).V(2).Info("rolled back a group whose pods never bound", "group", name)
			agState = cellcore.AGPending
			p.vcs.Changed()
		}
	}
	if hasGroup && (agState == cellcore.AGAllocated || agState == cellcore.AGBeingPreempted) {
		// Decided when the first member came: this member finds its slot.
		if err := p.core.CheckMember(req.Group); err != nil {
			p.event(pod, v1.EventTypeWarning, "InvalidSchedulingSpec", err.Error())
			p.ags.Refuse(name, "InvalidSchedulingSpec", err.Error())
			return reject(state, fwk.UnschedulableAndUnresolvable, err.Error())
		}
		return p.assign(state, pod, req)
	}
	start := time.Now()
	d, err := p.core.Schedule(req.Group)
	metrics.PlacementDecided(start, d, err)
	if err != nil && !cellcore.IsSpecError(err) {
		// Not the user's mistake: logged, counted and retried with the
		// framework's error backoff; the AffinityGroup is not refused.
		metrics.InternalError("schedule")
		klog.FromContext(ctx).Error(err, "cell core internal error", "group", name, "pod", klog.KObj(pod))
		return nil, fwk.AsStatus(fmt.Errorf("scheduling affinity group %s: internal error, retried: %w", name, err))
	}
	if err != nil {
		p.event(pod, v1.EventTypeWarning, "InvalidSchedulingSpec", err.Error())
		p.ags.Refuse(name, "InvalidSchedulingSpec", err.Error())
		return reject(state, fwk.UnschedulableAndUnresolvable, err.Error())
	}
	p.vcs.Changed()
	for _, g := range d.Downgraded {
		// Events and the placement records, the latter in the background.
		metrics.Downgraded(p.groupVC(g), p.groups.MemberCount(g))
		p.downgraded(klog.FromContext(ctx), g, lazyNote(g, name, req.Group.Priority, req.Group.VirtualCluster))
	}
	if d.Kind == cellcore.Preempt {
		for _, v := range d.Victims {
			metrics.VictimGroup(p.groupVC(v))
		}
	}
	switch d.Kind {
	case cellcore.Placed:
		if msg := p.ags.Ended(name, pod); msg != "" {
			// The pending timeout fired while the core placed it (the
			// writer forgot the group after this PreFilter's first
			// check): the cells go back.
			if _, err := p.core.DeleteAffinityGroup(name); err == nil {
				p.vcs.Changed()
			}
			return reject(state, fwk.UnschedulableAndUnresolvable, msg)
		}
		p.groups.Allocated(name)
		if pgCycle != nil {
			p.holds.add(name, pgCycle)
		}
		p.ags.Waiting(name, "Scheduled", "its cells are allocated: its pods bind", nil)
		return p.assign(state, pod, req)
	case cellcore.Preempt:
		state.Write(stateKey, &cycleState{group: name, preempt: &d, leaves: req.LeafCellNumber})
		if pgCycle != nil {
			// No PostFilter runs in a pod-group cycle: the group's
			// PodGroupPostFilter evicts the victims.
			writePreempt(pgCycle, name, &d)
		}
		msg := fmt.Sprintf("affinity group %s (priority %d) preempts %s in virtual cluster %q and binds once their pods are deleted",
			name, req.Group.Priority, english.JoinNames(d.Victims), req.Group.VirtualCluster)
		p.ags.Waiting(name, "Preempting", msg, d.Victims)
		return nil, fwk.NewStatus(fwk.Unschedulable, msg)
	default:
		msg := d.Reason
		reason := "Waiting"
		if d.OverLimit {
			reason = "OverLimit"
		}
		if d.State == cellcore.AGPreempting && len(d.Victims) > 0 {
			msg = fmt.Sprintf("affinity group %s preempts %s and binds once their pods are deleted", name, english.JoinNames(d.Victims))
			reason = "Preempting"
			// Still waiting for victims: make sure every victim pod is on its
			// way out (a deletion that failed is asked for again).
			p.evictVictims(klog.FromContext(ctx), pod, name, d.Victims)
		}
		p.ags.Waiting(name, reason, msg, d.Victims)
		return reject(state, fwk.Unschedulable, msg)
	}
}

// groupVC is the virtual cluster a group names ("" if the core does not
// know it), a metric label.
func (p *HiveSched) groupVC(group string) string {
	st, _ := p.core.AffinityGroupStatus(group)
	return st.VirtualCluster
}

// assign gives the pod its slot in its placed group and narrows the
// candidate nodes to the slot's node.
func (p *HiveSched) assign(state fwk.CycleState, pod *v1.Pod, req *podrequest.Request) (*fwk.PreFilterResult, *fwk.Status) {
	pp, err := p.core.AssignPod(req.Group.Name, podrequest.PodKey(pod), req.LeafCellNumber)
	if err != nil {
		p.event(pod, v1.EventTypeWarning, "InvalidSchedulingSpec", err.Error())
		return reject(state, fwk.UnschedulableAndUnresolvable, err.Error())
	}
	state.Write(stateKey, &cycleState{group: req.Group.Name, node: pp.Node, leaves: req.LeafCellNumber})
	return &fwk.PreFilterResult{NodeNames: sets.New(pp.Node)}, nil
}

// PreFilterExtensions is nil: the decision does not depend on other pods
// being added or removed in the framework's what-if evaluations.
func (p *HiveSched) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

func readState(state fwk.CycleState) *cycleState {
	d, err := state.Read(stateKey)
	if err != nil {
		return nil
	}
	s, _ := d.(*cycleState)
	return s
}

// Filter passes only the node PreFilter chose, and only while it is healthy.
// It reads the cycle state and the core's node health: no API call, no
// allocation on the passing path.
func (p *HiveSched) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s := readState(state)
	if s == nil {
		return nil
	}
	if s.rejected { // PreFilter refused the pod: no node is for it
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "refused by "+Name+" in PreFilter")
	}
	node := nodeInfo.Node()
	if node == nil || node.Name != s.node {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "affinity group "+s.group+" places this pod on node "+s.node)
	}
	if h, _ := p.core.NodeHealthOf(node.Name); h != cellcore.NodeHealthy {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node "+node.Name+" is "+h.String())
	}
	return nil
}

// PostFilter carries out a preemption decided in PreFilter (AG e1): every pod
// of every victim group is deleted (whole gangs, never part of one; the
// deletions run in the background, see evictor), and the pod is nominated to
// its reserved node. It schedules once the victims are
// gone (cell e9, AG e4, then AG e2 on its next PreFilter).
//
// A pod that PreFilter refused (a bad request, or a group that waits) gets
// UnschedulableAndUnresolvable with no message: the core's decision is all
// there is to say, no other plugin's PostFilter can change it. The framework
// then runs no PostFilter plugin after HiveSched and reports only this empty
// status, so the pod's FailedScheduling event is PreFilter's one sentence.
// (With Unschedulable, the framework appends the words of every PostFilter
// plugin that ran: DynamicResources, enabled by default and ordered before
// HiveSched, says "no new claims to deallocate" for any pod without claims.)
// Pods HiveSched did not refuse (a plain pod, or ours rejected by another
// Filter plugin) are left to the other PostFilter plugins.
func (p *HiveSched) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	s := readState(state)
	if s != nil && s.rejected {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable)
	}
	if s != nil && s.preempt == nil && s.node != "" {
		p.releaseRejectedPlacement(klog.FromContext(ctx), pod, s, statuses.Get(s.node))
	}
	if s == nil || s.preempt == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	p.evictVictims(klog.FromContext(ctx), pod, s.group, s.preempt.Victims)
	node := ""
	for _, pp := range s.preempt.Pods {
		if pp.LeafCellNumber == s.leaves && pp.Node != "" {
			node = pp.Node
			break
		}
	}
	if node == "" {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable) // PreFilter said it
	}
	return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatedNodeName: node, NominatingMode: fwk.ModeOverride}},
		fwk.NewStatus(fwk.Success)
}

// releaseRejectedPlacement gives back the cells of a placed group whose pod
// the node it was placed on rejects for good: another filter said
// UnschedulableAndUnresolvable (a node selector or taint that does not
// match, less allocatable than the pod asks for, an unhealthy node), so
// holding the cells only keeps them from the VC's other groups. When no
// member of the group got through yet (none reserved or bound), the group is
// rolled back at once (x1) and placed again when the pod is retried. A
// member waiting at Permit instead times out and Unreserve rolls the group
// back; a resolvable rejection (the node is busy now) keeps the cells until
// PreFilter finds the placement stale (twice the Permit timeout).
func (p *HiveSched) releaseRejectedPlacement(logger klog.Logger, pod *v1.Pod, s *cycleState, st *fwk.Status) {
	if st == nil || st.Code() != fwk.UnschedulableAndUnresolvable || !p.groups.Unused(s.group) {
		return
	}
	if err := p.core.RollbackAffinityGroup(s.group); err != nil {
		return // not Allocated (any more): nothing is held for it
	}
	p.vcs.Changed()
	plugin, reasons := st.Plugin(), strings.Join(st.Reasons(), "; ")
	msg := fmt.Sprintf("affinity group %s gave its cells back: node %s, where it was placed, rejects the pod (%s: %s); it is placed again when the pod is retried",
		s.group, s.node, plugin, reasons)
	if strings.Contains(reasons, HivedSchedulingEnableResource) {
		msg += fmt.Sprintf("; the scheduler profile must list %s in NodeResourcesFit's ignoredResources (manifests/scheduler)", HivedSchedulingEnableResource)
	}
	logger.Info("placed affinity group rolled back: its node rejects the pod", "pod", klog.KObj(pod), "group", s.group, "node", s.node, "plugin", plugin, "reasons", reasons)
	p.event(pod, v1.EventTypeWarning, "PlacementRejected", msg)
}

// evictVictims deletes every pod of every victim group (whole gangs), in the
// background; a victim group without pods is deleted from the core at once.
// Called by PostFilter when a preemption is decided, and again by PreFilter
// while the preemptor waits, so that a deletion that failed is retried.
func (p *HiveSched) evictVictims(logger klog.Logger, preemptor *v1.Pod, group string, victims []string) {
	var pods []*v1.Pod
	for _, victim := range victims {
		vps := p.groups.Pods(victim)
		if len(vps) == 0 {
			// No pod left to delete: the group is gone as far as Kubernetes
			// knows. No deletion event will requeue the preemptors it frees.
			res, err := p.core.DeleteAffinityGroup(victim)
			if err != nil {
				logger.Error(err, "deleting a victim group without pods", "group", victim)
			}
			p.vcs.Changed()
			p.activate(logger, res.ReadyPreemptors)
			continue
		}
		pods = append(pods, vps...)
	}
	for _, victim := range victims {
		p.ags.Preempted(victim, group)
	}
	for _, vp := range p.evictor.Evict(logger, pods) {
		victim := p.groups.GroupOf(vp)
		metrics.VictimPod(p.groupVC(victim))
		logger.Info("preempting", "victim", klog.KObj(vp), "group", victim, "preemptor", klog.KObj(preemptor), "preemptorGroup", group)
		p.event(vp, v1.EventTypeNormal, "Preempted", fmt.Sprintf("preempted by affinity group %s (whole group %s is deleted)", group, victim))
	}
}

// stillVictim reports whether pod's group is still being preempted: a
// victim whose preemption was called off (AG x2: its preemptor was deleted
// or placed elsewhere) is left running.
func (p *HiveSched) stillVictim(pod *v1.Pod) bool {
	st, ok := p.core.AffinityGroupState(p.groups.GroupOf(pod))
	return ok && st == cellcore.AGBeingPreempted
}

// --- Reserve, Permit, Bind ---

// Reserve records that the member passed the scheduling cycle; its cells were
// allocated with its group (AG e0) in PreFilter.
//
// In a pod-group cycle's simulation it does nothing: the core decided for
// the group already, and step 3's Reserve confirms that decision
// (podgroupcycle.go).
func (p *HiveSched) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s := readState(state)
	switch {
	case s == nil || s.group == "" || state.IsPodGroupSchedulingCycle():
		return nil
	case podrequest.PodGroupName(pod) != "":
		return p.reserveInPodGroupCycle(pod, s)
	}
	p.groups.Reserve(s.group, pod)
	return nil
}

// Unreserve undoes Reserve. If no member of the group is bound yet, the whole
// allocation is rolled back (extension x1: Allocated -> Pending, cells Free)
// and the members waiting at Permit are rejected: all-or-nothing.
//
// A pod-group cycle's simulated Unreserve does nothing: the simulation is
// reverted whatever its outcome, and the group's cells stay held for the
// cycle's binding step (podgroupcycle.go).
func (p *HiveSched) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	s := readState(state)
	if s == nil || s.group == "" || state.IsPodGroupSchedulingCycle() {
		return
	}
	if s.bindErr != nil && !apierrors.IsNotFound(s.bindErr) {
		// The binding failed (a pod deleted meanwhile is not retried: its
		// group waits for a replacement as any incomplete gang does).
		p.bindFailed(ctx, s, pod, nodeName)
		return
	}
	if !p.groups.Unreserve(s.group, pod) {
		return // some member is bound: only this pod retries, on the same cells
	}
	if bound := p.boundMember(ctx, s.group); bound != "" {
		// The informer lags, or a bind went through although its response
		// was lost: the pod runs on the group's cells, which must not go
		// Free. Only this pod retries, on the same cells.
		klog.FromContext(ctx).Info("not rolling back an affinity group: the API server has a member bound", "group", s.group, "bound", bound, "pod", klog.KObj(pod))
		return
	}
	if p.rollBack(s.group) {
		klog.FromContext(ctx).V(2).Info("rolled back affinity group", "group", s.group, "pod", klog.KObj(pod))
	}
	p.rejectWaiting(s.group, "affinity group "+s.group+" rolled back: a member failed")
}

// rollBack returns an Allocated group to Pending (AG x1): its cells go
// Free, and what the bind gate and the bind retries kept of it goes. It
// reports whether the core rolled it back.
func (p *HiveSched) rollBack(group string) bool {
	p.bindGate.Forget(group)
	p.bindRetries.Forget(group)
	if err := p.core.RollbackAffinityGroup(group); err != nil {
		return false
	}
	p.vcs.Changed()
	return true
}

// rejectWaiting rejects the group's members waiting at Permit with msg.
func (p *HiveSched) rejectWaiting(group, msg string) {
	p.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if p.groups.GroupOf(wp.GetPod()) == group {
			wp.Reject(Name, msg)
		}
	})
}

// boundMember asks the API server (not the informer) whether a member of
// the group is bound, and returns its name ("" if none; a description if
// the API server cannot tell, so that nothing is rolled back blind). Only
// Unreserve calls it, before rolling a group back: a failure path, never
// the per-node hot path.
func (p *HiveSched) boundMember(ctx context.Context, group string) string {
	bound, err := p.boundMembers(ctx, group)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	if len(bound) > 0 {
		return bound[0].Namespace + "/" + bound[0].Name
	}
	return ""
}

// Permit lets the members of a group bind together: it waits until all of
// them are reserved (or bound), then allows the waiting ones.
func (p *HiveSched) Permit(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	s := readState(state)
	if s == nil {
		return nil, 0
	}
	ready, want := p.groups.ReadyCount(s.group)
	if ready < want {
		return fwk.NewStatus(fwk.Wait, fmt.Sprintf("waiting for %d more members of affinity group %s", want-ready, s.group)), p.permitTimeout
	}
	var waiting []fwk.WaitingPod
	p.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if p.groups.GroupOf(wp.GetPod()) == s.group {
			waiting = append(waiting, wp)
		}
	})
	// Announce to the bind gate how many members go now, before any of
	// them can reach Bind: the first to get there asks room for all. Only
	// when HiveSched binds: otherwise nothing would take the announcement
	// up.
	if p.bindsFirst() {
		p.bindGate.Expect(s.group, len(waiting)+1)
	}
	for _, wp := range waiting {
		wp.Allow(Name)
	}
	return nil, 0
}

// placementAnnotations assigns the pod its leaf cells inside its group's
// allocation (AG e3's cell side) and returns the annotations that persist the
// placement (read back by recovery, ec) and the pod's device indices.
func (p *HiveSched) placementAnnotations(s *cycleState, pod *v1.Pod) (map[string]string, error) {
	req, err := p.request(pod)
	if err != nil || req == nil {
		return nil, fmt.Errorf("pod spec changed during binding: %v", err)
	}
	pp, err := p.core.AssignPod(s.group, podrequest.PodKey(pod), s.leaves)
	if err != nil {
		return nil, err
	}
	return p.signer.Annotations(pod, placement.NewRecord(req.Group, pp, p.groupDowngraded(s.group)), req.Hived), nil
}

// Bind binds our pods with their placement in one API call: the API server
// copies a Binding's annotations onto the pod as it sets spec.nodeName, so
// the pod is never bound without its placement, and binding costs one write
// instead of a patch and a bind. Pods that are not ours are left to the next
// binder (DefaultBinder).
//
// The call waits for its gang's turn at the bind gate (maxBindingPods): the
// members of a gang go out together into an API server that is not flooded
// with the bindings of every gang released before, so they land together.
//
// The profile must list HiveSched under bind (manifests/scheduler does);
// otherwise DefaultBinder binds first and PreBind writes the placement instead.
func (p *HiveSched) Bind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s := readState(state)
	if s == nil {
		return fwk.NewStatus(fwk.Skip)
	}
	ann, err := p.placementAnnotations(s, pod)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if err := p.bindGate.Acquire(ctx, s.group); err != nil {
		return fwk.AsStatus(fmt.Errorf("binding pod %s/%s: waiting for its gang's turn: %w", pod.Namespace, pod.Name, err))
	}
	defer p.bindGate.Release()
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Annotations: ann},
		Target:     v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if c := p.handle.APICacher(); c != nil {
		onFinish, err := c.BindPod(binding)
		if err == nil {
			err = c.WaitOnFinish(ctx, onFinish)
		}
		if err != nil {
			s.bindErr = err
			return fwk.AsStatus(fmt.Errorf("binding pod %s/%s: %w", pod.Namespace, pod.Name, err))
		}
		return nil
	}
	if err := p.handle.ClientSet().CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		s.bindErr = err
		return fwk.AsStatus(fmt.Errorf("binding pod %s/%s: %w", pod.Namespace, pod.Name, err))
	}
	return nil
}

// PostBind forgets the member's binding failures: it is bound.
func (p *HiveSched) PostBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	if s := readState(state); s != nil && s.group != "" {
		s.bindErr = nil
		p.bindRetries.Bound(s.group, pod.UID)
	}
}

// PreBind is the fallback for a profile where another bind plugin runs before
// HiveSched's Bind: it patches the placement onto the pod before that plugin
// binds it (two API writes per pod instead of one).
func (p *HiveSched) PreBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s := readState(state)
	if s == nil || p.bindsFirst() {
		return nil
	}
	ann, err := p.placementAnnotations(s, pod)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if err := p.annotate(ctx, pod, ann); err != nil {
		s.bindErr = err
		return fwk.AsStatus(fmt.Errorf("persisting placement: %w", err))
	}
	// From here only the profile's binder can fail the cycle: if it does,
	// Unreserve sees this and retries the pod as a binding failure; once
	// bound, PostBind clears it.
	s.bindErr = errBinderFailed
	return nil
}

// errBinderFailed is the binding failure Unreserve sees when the profile's
// bind plugin (not HiveSched) failed after PreBind wrote the placement.
var errBinderFailed = errors.New("the profile's bind plugin failed to bind it")

// PreBindPreFlight tells the framework whether PreBind has work for the pod:
// only for our pods, and only when HiveSched is not the profile's first binder.
func (p *HiveSched) PreBindPreFlight(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if readState(state) == nil || p.bindsFirst() {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// bindsFirst reports whether HiveSched's Bind is the first bind plugin of its
// profile. The framework orders plugins only after every plugin is built, so
// this is decided on first use, not in New.
func (p *HiveSched) bindsFirst() bool {
	p.bindOrder.Do(func() {
		lister, ok := p.handle.(interface{ ListPlugins() *schedconfig.Plugins })
		if !ok {
			return
		}
		if pl := lister.ListPlugins(); pl != nil && len(pl.Bind.Enabled) > 0 && pl.Bind.Enabled[0].Name == Name {
			p.ownBind = true
		}
		if !p.ownBind {
			klog.Background().Info("HiveSched is not the first bind plugin of its profile: placements are written by an extra pod patch in PreBind; list HiveSched under plugins.bind.enabled for one write per pod", "profile", p.schedulerName)
		}
	})
	return p.ownBind
}

// --- events ---

// EventsToRegister: deleted pods free cells (and complete gangs' victims),
// added pods complete gangs waiting at PreEnqueue, node changes change health.
func (p *HiveSched) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: p.hintPodDeleted},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add}, QueueingHintFn: p.hintPodAdded},
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeCondition | fwk.UpdateNodeTaint | fwk.UpdateNodeLabel}},
	}, nil
}

func (p *HiveSched) hintPodDeleted(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	deleted, ok := oldObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, nil
	}
	if p.recovery.Done() && p.groups.GroupOf(deleted) != "" {
		// Our pod informer's handler has not processed the deletion yet:
		// the core still holds its cells. Requeueing now would let the
		// pods popped before the release fail and the one popped after it
		// win, whatever the queue's order (the VC's sequencer). The
		// handler releases the cells, then activates every waiting pod
		// at once (onPod, activateWaiting), so the order decides.
		return fwk.QueueSkip, nil
	}
	// Parse without caching: the pod is gone from the index.
	if req, err := p.parse(deleted); err == nil && req != nil {
		return fwk.Queue, nil // its cells may be free now
	}
	return fwk.QueueSkip, nil
}

func (p *HiveSched) hintPodAdded(logger klog.Logger, pod *v1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	added, ok := newObj.(*v1.Pod)
	if !ok {
		return fwk.Queue, nil
	}
	if g := p.groups.GroupOf(added); g != "" && g == p.groups.GroupOf(pod) {
		return fwk.Queue, nil // one more member of the pod's gang
	}
	return fwk.QueueSkip, nil
}

// activate moves the pending pods of the named groups back to the active queue.
func (p *HiveSched) activate(logger klog.Logger, groups []string) {
	pods := map[string]*v1.Pod{}
	for _, g := range groups {
		for _, pod := range p.groups.Pods(g) {
			if pod.Spec.NodeName == "" {
				pods[pod.Namespace+"/"+pod.Name] = pod
			}
		}
	}
	if len(pods) > 0 {
		p.handle.Activate(logger, pods)
	}
}
