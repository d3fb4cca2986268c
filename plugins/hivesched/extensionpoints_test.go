package hivesched

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	schedlisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics/legacyregistry"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	"k8s.io/utils/ptr"

	"github.com/hivesched/hivesched/apis/config"
	"github.com/hivesched/hivesched/plugins/binding"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/cellspec"
	"github.com/hivesched/hivesched/plugins/groupindex"
	"github.com/hivesched/hivesched/plugins/metrics"
	"github.com/hivesched/hivesched/plugins/podrequest"
	"github.com/hivesched/hivesched/plugins/virtualclusters"
)

// testPlugin is a HiveSched on a real cell core (one node of 8 V100, VC
// "vc" of that node) and a real scheduler framework (kube-scheduler's own
// runtime, whose event recorder is client-go's recording fake): what
// PreFilter, PreEnqueue, QueueSort and SignPod use, without an API server.
type testPlugin struct {
	*HiveSched
	fw     framework.Framework
	events *events.FakeRecorder
}

func newTestPlugin(t *testing.T) *testPlugin {
	core, err := cellcore.New(cellcore.Config{
		CellTypes:     map[string]cellcore.CellTypeSpec{"V100-NODE": {ChildCellType: "V100", ChildCellNumber: 8, IsNodeLevel: true}},
		PhysicalCells: []cellcore.PhysicalCellSpec{{CellType: "V100-NODE", CellAddress: "n0"}},
	})
	require.NoError(t, err)
	require.NoError(t, core.SetNodeHealth("n0", cellcore.NodeHealthy))
	_, err = core.SetVirtualCluster(cellcore.VirtualClusterSpec{Name: "vc", VirtualCells: []cellcore.VirtualCellSpec{{CellType: "V100-NODE", CellNumber: 1}}})
	require.NoError(t, err)
	p := &HiveSched{core: core, resource: "nvidia.com/gpu", schedulerName: "hivesched", groups: groupindex.New("nvidia.com/gpu"),
		vcs: virtualclusters.New(virtualclusters.Config{Core: core}), binds: binds{retries: binding.NewRetries(3)},
		cycles: podGroupCycles{holds: newGroupHolds()}}
	cellTypes := cellspec.NewCellTypes(config.PhysicalClusterSpec{CellTypes: map[string]config.CellTypeSpec{
		"V100-NODE": {ChildCellType: "V100", ChildCellNumber: 8, IsNodeLevel: true}}})
	p.cellTypes.Store(&cellTypes)
	rec := events.NewFakeRecorder(100)
	schedmetrics.Register() // the framework's own metrics, as kube-scheduler registers them
	registry := frameworkruntime.Registry{Name: func(_ context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p.handle = h
		return p, nil
	}}
	on := schedconfig.PluginSet{Enabled: []schedconfig.Plugin{{Name: Name}}}
	profile := &schedconfig.KubeSchedulerProfile{SchedulerName: "hivesched", Plugins: &schedconfig.Plugins{
		PreEnqueue: on, QueueSort: on, PreFilter: on, Filter: on, PostFilter: on, Reserve: on, Permit: on, Bind: on,
	}}
	fw, err := frameworkruntime.NewFramework(t.Context(), registry, profile, frameworkruntime.WithEventRecorder(rec))
	require.NoError(t, err)
	return &testPlugin{HiveSched: p, fw: fw, events: rec}
}

// recorded drains the events recorded so far.
func (tp *testPlugin) recorded() []string {
	var out []string
	for {
		select {
		case e := <-tp.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// gangPod is a native-form member of the gang ns/<group> of n pods of
// gpus V100 each in VC "vc".
func gangPod(name, group string, n int, gpus int64, priority int) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name),
			Labels:      map[string]string{LabelVirtualCluster: "vc", LabelAffinityGroup: group},
			Annotations: map[string]string{AnnotationGroupMembers: fmt.Sprint(n), AnnotationPriority: fmt.Sprint(priority)}},
		Spec: v1.PodSpec{SchedulerName: "hivesched", Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
			Limits:   v1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}}},
	}
}

// plainPod asks for no GPU and names no VC: not hivesched's to place.
func plainPod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)},
		Spec: v1.PodSpec{SchedulerName: "hivesched", Containers: []v1.Container{{Name: "c"}}}}
}

// place has the core place the pod's group (read from the pod) and
// returns its request.
func (tp *testPlugin) place(t *testing.T, pod *v1.Pod) *podrequest.Request {
	req, err := tp.groups.Request(pod)
	require.NoError(t, err)
	require.NotNil(t, req)
	tp.groups.Track(pod)
	d, err := tp.core.Schedule(req.Group)
	require.NoError(t, err)
	require.Equal(t, cellcore.Placed, d.Kind)
	return req
}

func (tp *testPlugin) groupState(group string) cellcore.AGState {
	st, _ := tp.core.AffinityGroupState(group)
	return st
}

// internalErrors is hivesched_internal_errors_total for operation.
func internalErrors(t *testing.T, operation string) float64 {
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "hivesched_internal_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" && l.GetValue() == operation {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestAssignErrorsByKind (issue 31, errors by kind): a member's slot that
// the core cannot give because of a state it did not expect (its group is
// not known, or not Allocated) is an internal error: an Error status (the
// framework retries it with backoff), counted, and no event on the pod; a
// pod the group has no member slot for is the user's (InvalidSchedulingSpec,
// UnschedulableAndUnresolvable).
func TestAssignErrorsByKind(t *testing.T) {
	tp := newTestPlugin(t)
	metrics.Register("errors-by-kind", tp.core, func() bool { return true }, t.Context().Done())
	ctx := t.Context()

	unknown := gangPod("u0", "unknown", 1, 8, 0)
	req, err := tp.groups.Request(unknown)
	require.NoError(t, err)
	before := internalErrors(t, "assign")
	_, st := tp.assign(ctx, framework.NewCycleState(), unknown, req)
	require.Equal(t, fwk.Error, st.Code(), "a group the core does not know: %v", st)
	require.Contains(t, st.Message(), "internal error, retried")
	require.Equal(t, before+1, internalErrors(t, "assign"))

	pending := gangPod("p0", "pending", 1, 8, 0)
	req = tp.place(t, pending)
	require.NoError(t, tp.core.RollbackAffinityGroup(req.Group.Name))
	_, st = tp.assign(ctx, framework.NewCycleState(), pending, req)
	require.Equal(t, fwk.Error, st.Code(), "a group that is Pending, not Allocated: %v", st)
	require.Equal(t, before+2, internalErrors(t, "assign"))
	require.Empty(t, tp.recorded(), "an internal error is not written on the user's pod")

	g0, g1 := gangPod("g0", "g", 1, 8, 0), gangPod("g1", "g", 1, 8, 0)
	req = tp.place(t, g0)
	res, st := tp.assign(ctx, framework.NewCycleState(), g0, req)
	require.True(t, st.IsSuccess(), "%v", st)
	require.Equal(t, []string{"n0"}, res.NodeNames.UnsortedList())
	_, st = tp.assign(ctx, framework.NewCycleState(), g1, req)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code(), "a second pod of a one-pod gang: the user's")
	evs := tp.recorded()
	require.Len(t, evs, 1)
	require.Contains(t, evs[0], "Warning InvalidSchedulingSpec")
	require.Contains(t, evs[0], "has no free slot")
	require.Equal(t, before+2, internalErrors(t, "assign"), "a refusal is not counted as internal")
}

// TestEveryCycleEndsTheOnesBefore (issue 31): a hold no step 3 confirmed
// is released by the next scheduling cycle, whatever pod it schedules: a
// plain pod's PreFilter returns Skip, and releases it first.
func TestEveryCycleEndsTheOnesBefore(t *testing.T) {
	tp := newTestPlugin(t)
	req := tp.place(t, gangPod("h0", "held", 1, 8, 0))
	tp.cycles.holds.add(req.Group.Name, framework.NewCycleState())
	_, st := tp.PreFilter(t.Context(), framework.NewCycleState(), plainPod("web"), nil)
	require.Equal(t, fwk.Skip, st.Code())
	require.Equal(t, cellcore.AGPending, tp.groupState(req.Group.Name), "the plain pod's cycle released the hold of the cycle before it")
	require.Zero(t, tp.cycles.holds.n.Load())
	vc, _ := tp.core.VirtualClusterStatus("vc")
	require.Zero(t, vc.Cells[0].UsedLeafCells)
}

// TestPreEnqueueEndsTheHoldingCycle (issue 31): the framework requeues the
// pods of a pod group whose cycle failed, whatever the failure (its
// PodGroupPostFilter runs only for Unschedulable), through the PreEnqueue
// plugins: a member's PreEnqueue releases what the cycle held and did not
// confirm; a confirmed hold, or a group with a reserved member, is kept.
func TestPreEnqueueEndsTheHoldingCycle(t *testing.T) {
	tp := newTestPlugin(t)
	member := gangPod("m0", "gang", 1, 8, 0)
	req := tp.place(t, member)
	cycle := framework.NewCycleState()
	tp.cycles.holds.add(req.Group.Name, cycle)
	require.Nil(t, tp.PreEnqueue(t.Context(), plainPod("web")), "a plain pod passes")
	require.Equal(t, cellcore.AGAllocated, tp.groupState(req.Group.Name), "not the held group's pod")
	require.Nil(t, tp.PreEnqueue(t.Context(), member))
	require.Equal(t, cellcore.AGPending, tp.groupState(req.Group.Name), "requeued after its cycle: the hold is released")

	// Confirmed by step 3's Reserve: PreEnqueue of a member finds no hold.
	d, err := tp.core.Schedule(req.Group)
	require.NoError(t, err)
	require.Equal(t, cellcore.Placed, d.Kind)
	tp.cycles.holds.add(req.Group.Name, cycle)
	s := &cycleState{group: req.Group.Name, leaves: 8}
	require.Nil(t, tp.reserveInPodGroupCycle(member, s))
	require.Nil(t, tp.PreEnqueue(t.Context(), member))
	require.Equal(t, cellcore.AGAllocated, tp.groupState(req.Group.Name), "a confirmed hold stays")
}

// TestSignPod (KEP-5598 opportunistic batching): through kube-scheduler's
// own framework, a pod hivesched does not place gets a signature (so that
// hivesched, the profile's filter, does not turn batching off for it); a
// pod that asks hivesched for cells, or whose request hivesched refuses, is
// not signed: each gang member has its own slot.
func TestSignPod(t *testing.T) {
	tp := newTestPlugin(t)
	ctx := t.Context()

	fragments, st := tp.SignPod(ctx, plainPod("web"))
	require.True(t, st.IsSuccess(), "%v", st)
	require.Empty(t, fragments, "nothing of hivesched's in a plain pod's signature")
	require.NotNil(t, tp.fw.SignPod(ctx, plainPod("web")), "the framework signs a plain pod: batching stays on for it")

	gpu := gangPod("gpu", "g", 2, 4, 0)
	_, st = tp.SignPod(ctx, gpu)
	require.Equal(t, fwk.Unschedulable, st.Code(), "a GPU pod is refused")
	require.Nil(t, tp.fw.SignPod(ctx, gpu))

	single := gangPod("one", "one", 1, 1, 0)
	delete(single.Labels, LabelAffinityGroup)
	_, st = tp.SignPod(ctx, single)
	require.Equal(t, fwk.Unschedulable, st.Code(), "a GPU pod alone too: it has its own cells")

	bad := gangPod("bad", "g", 2, 4, 0)
	bad.Annotations[AnnotationGroupMembers] = "two"
	_, st = tp.SignPod(ctx, bad)
	require.Equal(t, fwk.Unschedulable, st.Code(), "a request hivesched refuses is not batched either")
}

// TestQueueSort (issue 31): pods and pod groups (QueuedEntityInfo, as 1.37's
// queue holds them) are ordered by the same key: priority first, then age;
// a pod group by its first unscheduled member, as a gang's members share
// their group's key.
func TestQueueSort(t *testing.T) {
	tp := newTestPlugin(t)
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	aged := func(pod *v1.Pod, at time.Time) *v1.Pod {
		pod.CreationTimestamp = metav1.NewTime(at)
		tp.groups.Track(pod) // the pod informer's handler read it
		return pod
	}
	queuedPod := func(pod *v1.Pod) fwk.QueuedEntityInfo {
		return &framework.QueuedPodInfo{PodInfo: &framework.PodInfo{Pod: pod}, QueueingParams: framework.QueueingParams{Timestamp: t0}}
	}
	podGroup := func(name string, priority int32, at time.Time, pods ...*v1.Pod) fwk.QueuedEntityInfo {
		return &framework.QueuedPodGroupInfo{
			PodGroupInfo: &framework.PodGroupInfo{PodGroup: &schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
				Spec: schedv1beta1.PodGroupSpec{Priority: ptr.To(priority)}}, UnscheduledPods: pods},
			QueueingParams: framework.QueueingParams{Timestamp: at},
		}
	}
	withPriority := func(pod *v1.Pod, prio int32) *v1.Pod { pod.Spec.Priority = &prio; return pod }

	// Pods: priority first, then age (plain pods by their PriorityClass
	// value, hivesched's by their group's priority).
	oldLow := queuedPod(aged(withPriority(plainPod("old-low"), 1), t0))
	newHigh := queuedPod(aged(withPriority(plainPod("new-high"), 5), t0.Add(time.Hour)))
	newLow := queuedPod(aged(withPriority(plainPod("new-low"), 1), t0.Add(time.Hour)))
	require.True(t, tp.Less(newHigh, oldLow), "higher priority first")
	require.False(t, tp.Less(oldLow, newHigh))
	require.True(t, tp.Less(oldLow, newLow), "same priority: older first")
	require.False(t, tp.Less(newLow, oldLow))
	gangHigh := queuedPod(aged(gangPod("gh-0", "gh", 2, 4, 100), t0.Add(2*time.Hour)))
	require.True(t, tp.Less(gangHigh, newHigh), "a hivesched pod by its group's priority")

	// Pod groups: by their first unscheduled member's key.
	pgHigh := podGroup("pg-high", 0, t0.Add(3*time.Hour), aged(gangPod("pgh-0", "pgh", 2, 4, 50), t0.Add(3*time.Hour)), aged(gangPod("pgh-1", "pgh", 2, 4, 50), t0.Add(3*time.Hour)))
	pgLowOld := podGroup("pg-low-old", 0, t0, aged(gangPod("pglo-0", "pglo", 1, 4, 10), t0))
	pgLowNew := podGroup("pg-low-new", 0, t0.Add(time.Hour), aged(gangPod("pgln-0", "pgln", 1, 4, 10), t0.Add(time.Hour)))
	require.True(t, tp.Less(pgHigh, pgLowOld), "higher priority first")
	require.True(t, tp.Less(pgLowOld, pgLowNew), "same priority: older first")
	require.False(t, tp.Less(pgLowNew, pgLowOld))
	// Pods and pod groups in one order.
	require.True(t, tp.Less(gangHigh, pgHigh), "priority 100 before 50")
	require.True(t, tp.Less(pgHigh, newHigh), "priority 50 before 5")
	require.True(t, tp.Less(pgLowOld, oldLow), "priority 10 before 1")
	// A pod group with no pod at hand: its own priority and queue time.
	emptyHigh, emptyLow := podGroup("e-high", 7, t0.Add(time.Hour)), podGroup("e-low", 3, t0)
	require.True(t, tp.Less(emptyHigh, emptyLow))
	emptyOld, emptyNew := podGroup("e-old", 3, t0), podGroup("e-new", 3, t0.Add(time.Minute))
	require.True(t, tp.Less(emptyOld, emptyNew))
	require.False(t, tp.Less(emptyNew, emptyOld))
}

// TestPodGroupSeenBeforeThePodIsReadAgain (CI flake of
// TestWorkloadUnknownPodGroup): a pod read before the PodGroup informer
// delivered its PodGroup keeps that refusal until the plugin's PodGroup
// handler reads it again, but the scheduler's queue, on the same informer,
// may let the pod into a cycle first. PreFilter reads such a pod again: it
// is placed, and not told its PodGroup does not exist.
func TestPodGroupSeenBeforeThePodIsReadAgain(t *testing.T) {
	tp := newTestPlugin(t)
	pgs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	tp.groups.SetResolver(podrequest.NewResolver("nvidia.com/gpu", podrequest.Lookups{Workloads: &podrequest.Workloads{
		PodGroups: schedlisters.NewPodGroupLister(pgs),
		Workloads: schedlisters.NewWorkloadLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})),
	}}))
	pod := gangPod("w0", "", 1, 8, 0)
	delete(pod.Labels, LabelAffinityGroup)
	delete(pod.Annotations, AnnotationGroupMembers)
	pod.ResourceVersion = "1"
	pod.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("now")}

	_, err := tp.groups.Request(pod) // the pod handler, before the PodGroup came
	_, missing := podrequest.IsMissingPodGroup(err)
	require.True(t, missing, "%v", err)

	require.NoError(t, pgs.Add(&schedv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "now", Namespace: "ns", Labels: map[string]string{LabelVirtualCluster: "vc"}},
		Spec: schedv1beta1.PodGroupSpec{SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: 1}}}}))
	req, st := tp.readRequest(t.Context(), framework.NewCycleState(), pod)
	require.Nil(t, st, "read again: the PodGroup is there")
	require.Equal(t, "ns/now", req.Group.Name)
	require.Empty(t, tp.recorded(), "no event says the PodGroup does not exist")

	other := gangPod("x0", "", 1, 8, 0)
	delete(other.Labels, LabelAffinityGroup)
	delete(other.Annotations, AnnotationGroupMembers)
	other.ResourceVersion = "1"
	other.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("never")}
	_, st = tp.readRequest(t.Context(), framework.NewCycleState(), other)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code(), "still missing: it waits")
	require.Contains(t, st.Message(), `pod names pod group "never"`)
}
