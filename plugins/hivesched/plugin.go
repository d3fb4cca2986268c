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
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
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
	"github.com/hivesched/hivesched/plugins/dra"
	"github.com/hivesched/hivesched/plugins/groupindex"
	"github.com/hivesched/hivesched/plugins/inspect"
	"github.com/hivesched/hivesched/plugins/metrics"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/plugins/podrequest"
	"github.com/hivesched/hivesched/plugins/recovery"
	"github.com/hivesched/hivesched/plugins/selfcheck"
	"github.com/hivesched/hivesched/plugins/virtualclusters"
)

// Name is the plugin's name in KubeSchedulerConfiguration.
const Name = config.PluginName

// HiveSched is the plugin: the extension points, the informers' handlers,
// and the parts they drive (docs/plugin.md, "Packages").
type HiveSched struct {
	handle fwk.Handle
	core   *cellcore.Core

	// Settings, from the args and the profile.
	resource      v1.ResourceName                    // the leaf cell resource pods request
	permitTimeout time.Duration                      // how long Permit waits for a whole gang
	schedulerName string                             // the profile: pods of other schedulers are not ours
	cellTypes     atomic.Pointer[cellspec.CellTypes] // what the cell type hierarchy says of a request (replaced with the physical cluster)
	vcClient      versioned.Interface                // VirtualClusters and AffinityGroups (informers, recovery)

	groups   *groupindex.Index         // the member pods of every group, and their requests
	vcs      *virtualclusters.Registry // VirtualClusters: the core's VCs, admission, status
	ags      *affinitygroups.Tracker   // AffinityGroup lifecycles and their writer
	devices  *devices.Tracker          // device health and foreign pods' devices, per node
	signer   *placement.Signer         // signs and verifies placement records
	records  *placement.RecordWriter   // rewrites the records of downgraded groups
	recovery recovery.Gate             // rebuilds the allocations once, ordered with the pod handler
	victims  *binding.Evictor          // deletes the pods of preempted groups
	deleter  binding.Deleter           // deletes pods with at most the victims' grace period
	binds    binds                     // the binding path's pacing and failures (bind.go)
	cycles   podGroupCycles            // what pod-group cycles hold (podgroupcycle.go)
	lost     lostGangs                 // gangs that lost a member while they ran (memberloss.go)
	promos   promotions                // extra pods taking a lost member's slot (elastic.go)
	waiting  sync.Map                  // pod UID -> true: members whose gang's wait is watched (waiting.go)
	pgs      *podGroups                // scheduler-plugins' PodGroups
	wl       *workloadAPI              // Workload API PodGroups, nil without GenericWorkload
	eventLog *inspect.EventLog         // recent preemptions and downgrades, for the dashboard (nil: inspect API off)
	dra      *dra.State                // GPU claims (DRA), nil without GPU DeviceClasses (plugins/dra, dra.go)
	writes   *selfcheck.Writes         // the outcome of the scheduler's own writes (selfcheck.go)
	topo     *sliceTopo                // the physical cluster kept in step with the ResourceSlices, nil with physicalClusterFrom Config (topology.go)
	early    earlyEvents               // events recorded before kube-scheduler's event sink runs
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

// New builds the cell core from the plugin args (or, with
// physicalClusterFrom ResourceSlices, from the Nodes and ResourceSlices it
// lists; topology.go keeps it in step with them), reads the placement signing
// key, and starts the informers and the status writers. The allocations of
// running pods are recovered before any scheduling: here, or with leader
// election when this process starts leading (ensureRecovered).
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, ok := obj.(*config.HiveSchedArgs)
	if !ok {
		return nil, fmt.Errorf("%s: args of type %T, want *HiveSchedArgs (is apis/config/scheme imported?)", Name, obj)
	}
	var err error
	if err = validation.ValidateHiveSchedArgs(nil, args); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	var topo *sliceTopo
	if args.PhysicalClusterFrom == config.PhysicalClusterFromResourceSlices {
		// The derived cells replace the (empty) physicalCluster in a copy:
		// the framework's args stay as configured.
		args = args.DeepCopy()
		var in topoInputs
		if in, args.PhysicalCluster, err = listTopology(ctx, args, h.ClientSet()); err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		topo = newSliceTopo(args, in, args.PhysicalCluster)
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
	statusEvery := time.Duration(args.StatusUpdateIntervalSeconds) * time.Second
	resource := v1.ResourceName(args.LeafCellResourceName)
	p := &HiveSched{
		handle:        h,
		core:          core,
		resource:      resource,
		permitTimeout: time.Duration(args.PermitWaitingTimeSeconds) * time.Second,
		vcClient:      vcClient,
		groups:        groupindex.New(resource),
		devices:       devices.New(core, resource),
		deleter:       binding.NewDeleter(h.ClientSet(), args.VictimGracePeriodSeconds),
		binds: binds{gate: binding.NewGateWith(binding.GateConfig{Limit: int(args.MaxBindingPods), Adaptive: args.BindGate == config.BindGateAdaptive,
			Floor: int(args.MinBindingPods), Logger: klog.FromContext(ctx).WithName("bindgate")}), retries: binding.NewRetries(int(args.MaxBindAttempts))},
		cycles: podGroupCycles{holds: newGroupHolds()},
		dra:    newDRA(args, h),
		writes: selfcheck.New(),
		topo:   topo,
	}
	p.early.holding = true
	if fw, ok := h.(interface{ ProfileName() string }); ok {
		p.schedulerName = fw.ProfileName()
	}
	if fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate); fts.EnableTopologyAwareWorkloadScheduling {
		if p.cycles.topology, err = topologyaware.New(ctx, nil, h, fts); err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
	}
	p.vcs = virtualclusters.New(virtualclusters.Config{Core: core, Client: vcClient, Every: statusEvery, Recovered: p.recovery.Done, Foreign: foreignOn{p}})
	p.ags = affinitygroups.New(affinitygroups.Config{Writes: args.AffinityGroupStatus, Client: agClient, Pods: h.ClientSet(), Core: core,
		Members: p.groups, VirtualClusters: p.vcs, Every: statusEvery, Retention: time.Duration(args.AffinityGroupRetentionSeconds) * time.Second,
		Recovered: p.recovery.Done, TimedOut: p.pendingTimedOut})
	p.victims = binding.NewEvictor(ctx, p.deleteVictim, p.stillVictim)
	p.binds.evictor = binding.NewEvictor(ctx, p.deleter.Delete, p.stillGivenUp)
	p.lost.ctx, p.lost.evictor = ctx, binding.NewEvictor(ctx, p.deleter.Delete, p.stillLost)
	cellTypes := cellspec.NewCellTypes(args.PhysicalCluster)
	p.cellTypes.Store(&cellTypes)
	cellTypes.WarnSkuTypes(klog.FromContext(ctx), args.PhysicalCluster)

	if p.signer, err = placement.LoadSigner(ctx, h.ClientSet()); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	// Fail at start, not at the first pod, when the CRD is missing.
	if _, err := vcClient.HiveschedV1alpha1().VirtualClusters().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return nil, fmt.Errorf("%s: listing virtual clusters (is the CRD installed?): %w", Name, err)
	}
	if _, err := vcClient.HiveschedV1alpha1().AffinityGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return nil, fmt.Errorf("%s: listing affinity groups (is the CRD manifests/crds/hivesched.io_affinitygroups.yaml installed?): %w", Name, err)
	}
	if p.pgs, err = newPodGroups(kc); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	pods := h.SharedInformerFactory().Core().V1().Pods()
	go p.early.release(ctx, pods.Informer().HasSynced, p.recordEvent)
	p.records = placement.NewDowngradeWriter(h.ClientSet(), pods.Lister(), pods.Informer().HasSynced, p.signer, p.groupDowngraded,
		func(object string, err error) { p.ownWrite(nil, selfcheck.WriteDowngrade, object, err) }, p.promotedRecord)
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
		access, err := inspect.DelegatedAccess(h.KubeConfig())
		if err != nil {
			p.records.ShutDown()
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		p.eventLog = inspect.NewEventLog()
		srv := inspect.New(inspect.Config{Core: core, Groups: p.groups, VirtualClusters: p.vcs, Lifecycles: p.ags, Pods: pods.Lister(), Ours: p.ours,
			Scheduler: p.schedulerName, Access: access, Events: p.eventLog, Ready: p.writes.Ready})
		if _, err := srv.Start(ctx, args.InspectBindAddress); err != nil {
			p.records.ShutDown()
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
	}
	metrics.Register(p.schedulerName, core, p.recovery.Done, ctx.Done())
	if p.binds.gate != nil {
		metrics.RegisterBindGate(p.schedulerName, p.binds.gate.Stats, ctx.Done())
	}
	p.startInformers(ctx)
	go p.records.Run(ctx)
	go p.vcs.Run(ctx)
	go every(ctx, holdTimeout/3, func() { p.releaseExpiredHolds(klog.FromContext(ctx)) })
	go p.ags.Run(ctx)
	if p.dra != nil {
		// Stale allocations in flight of an idle scheduler.
		go every(ctx, 5*time.Second, p.dropStaleSignals)
	}
	registerProfile(h, p)
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

// every calls f each period until ctx is done (the first call one period
// after the start): the janitors of an idle scheduler.
func every(ctx context.Context, period time.Duration, f func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// event records an event on an object (a pod, a VirtualCluster), where its
// owner looks.
func (p *HiveSched) event(obj runtime.Object, eventType, reason, note string) {
	p.eventLog.Note(obj, eventType, reason, note)
	if p.early.hold(obj, eventType, reason, note) {
		return
	}
	p.recordEvent(obj, eventType, reason, note)
}

func (p *HiveSched) recordEvent(obj runtime.Object, eventType, reason, note string) {
	if r := p.handle.EventRecorder(); r != nil {
		r.Eventf(obj, nil, eventType, reason, "Scheduling", "%s", note)
	}
}

// earlyEvents holds the events recorded while New runs (recovery, the VCs
// applied from the API server: a VC that does not fit is Rejected there).
// kube-scheduler starts its event sink in Run, after every plugin's New,
// and its broadcaster drops what is recorded while nothing watches it, so
// these would be lost: the VC's owner would find the rejection in its
// status but never in `kubectl describe`. They are recorded once the
// informers have synced, which kube-scheduler starts after the sink.
//
// The zero value records at once (a HiveSched built without New); New
// sets holding before anything can record.
type earlyEvents struct {
	mu      sync.Mutex
	holding bool
	held    []heldEvent
	dropped int
}

type heldEvent struct {
	obj                     runtime.Object
	eventType, reason, note string
}

// maxHeldEvents bounds what a start with many refusals holds; past it the
// events are only logged (each call site logs its refusal anyway).
const maxHeldEvents = 1000

// hold keeps an event until release; false when not holding.
func (e *earlyEvents) hold(obj runtime.Object, eventType, reason, note string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.holding {
		return false
	}
	if len(e.held) < maxHeldEvents {
		e.held = append(e.held, heldEvent{obj, eventType, reason, note})
	} else {
		e.dropped++
	}
	return true
}

// release records the held events once synced says the informers run, and
// every later event at once.
func (e *earlyEvents) release(ctx context.Context, synced cache.InformerSynced, record func(obj runtime.Object, eventType, reason, note string)) {
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		return
	}
	e.mu.Lock()
	held, dropped := e.held, e.dropped
	e.held, e.holding = nil, false
	e.mu.Unlock()
	for _, h := range held {
		record(h.obj, h.eventType, h.reason, h.note)
	}
	if dropped > 0 {
		klog.FromContext(ctx).Info("events recorded before the scheduler started were dropped past the limit", "dropped", dropped, "limit", maxHeldEvents)
	}
}
