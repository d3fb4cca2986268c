package hivesched

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/hivesched/hivesched/plugins/dra"
)

// DRAName is the name of the DynamicResources wrapper in
// KubeSchedulerConfiguration: a hivesched profile disables DynamicResources
// and enables HiveSchedDRA in its place (manifests/scheduler).
const DRAName = "HiveSchedDRA"

// HiveSchedDRA is Kubernetes' DynamicResources plugin, unmodified, run on a
// view of each pod without its GPU claims (and without the leaf cell
// resource, which a DeviceClass may map to DRA devices): hivesched
// allocates GPU claims itself (plugins/dra's State), DynamicResources every other claim
// of the profile's pods. The two never allocate one claim: DynamicResources
// is never shown a GPU claim, so it neither allocates, reserves nor
// deallocates one; and the devices hivesched decides are in flight (then
// allocated) in the shared DRA manager, which every DynamicResources of the
// process reads, from the decision on.
//
// The GPU classes are those of the profile's HiveSched (its args); a
// profile without HiveSched hides nothing.
type HiveSchedDRA struct {
	inner  fwkDRA
	handle fwk.Handle

	once sync.Once
	hs   *HiveSched
}

// fwkDRA is every extension point DynamicResources implements.
type fwkDRA interface {
	fwk.PreEnqueuePlugin
	fwk.PreFilterPlugin
	fwk.FilterPlugin
	fwk.PostFilterPlugin
	fwk.PodGroupPostFilterPlugin
	fwk.ScorePlugin
	fwk.ReservePlugin
	fwk.PreBindPlugin
	fwk.EnqueueExtensions
	fwk.SignPlugin
}

var (
	_ fwk.PreEnqueuePlugin         = &HiveSchedDRA{}
	_ fwk.PreFilterPlugin          = &HiveSchedDRA{}
	_ fwk.FilterPlugin             = &HiveSchedDRA{}
	_ fwk.PostFilterPlugin         = &HiveSchedDRA{}
	_ fwk.PodGroupPostFilterPlugin = &HiveSchedDRA{}
	_ fwk.ScorePlugin              = &HiveSchedDRA{}
	_ fwk.ReservePlugin            = &HiveSchedDRA{}
	_ fwk.PreBindPlugin            = &HiveSchedDRA{}
	_ fwk.EnqueueExtensions        = &HiveSchedDRA{}
	_ fwk.SignPlugin               = &HiveSchedDRA{}
)

// profiles maps a profile's framework handle to its HiveSched, for the
// profile's HiveSchedDRA.
var profiles sync.Map

func registerProfile(h fwk.Handle, p *HiveSched) { profiles.Store(h, p) }

// NewDRA builds the wrapper around DynamicResources, with DynamicResources'
// default args (HiveSchedDRA takes none).
func NewDRA(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	args := &schedconfig.DynamicResourcesArgs{}
	if utilfeature.DefaultFeatureGate.Enabled(features.DRASchedulerFilterTimeout) {
		args.FilterTimeout = &metav1.Duration{Duration: schedconfig.DynamicResourcesFilterTimeoutDefault}
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.DRADeviceBindingConditions) && utilfeature.DefaultFeatureGate.Enabled(features.DRAResourceClaimDeviceStatus) {
		args.BindingTimeout = &metav1.Duration{Duration: schedconfig.DynamicResourcesBindingTimeoutDefault}
	}
	pl, err := dynamicresources.New(ctx, args, h, fts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", DRAName, err)
	}
	inner, ok := pl.(fwkDRA)
	if !ok {
		return nil, fmt.Errorf("%s: DynamicResources (%T) lacks an extension point", DRAName, pl)
	}
	return &HiveSchedDRA{inner: inner, handle: h}, nil
}

// Name returns the plugin name.
func (w *HiveSchedDRA) Name() string { return DRAName }

// hivesched is the profile's HiveSched (nil: none, or no GPU classes).
func (w *HiveSchedDRA) hivesched() *HiveSched {
	w.once.Do(func() {
		if v, ok := profiles.Load(w.handle); ok {
			w.hs = v.(*HiveSched)
		}
	})
	return w.hs
}

// view is the pod DynamicResources sees.
func (w *HiveSchedDRA) view(pod *v1.Pod) *v1.Pod {
	hs := w.hivesched()
	if hs == nil || hs.dra == nil {
		return pod
	}
	return hs.dra.View(pod, hs.resource)
}

// viewKey is where PreFilter leaves the pod's view for the later points.
const viewKey fwk.StateKey = DRAName + "/view"

type viewState struct{ pod *v1.Pod }

func (s *viewState) Clone() fwk.StateData { return s }

func (w *HiveSchedDRA) cachedView(state fwk.CycleState, pod *v1.Pod) *v1.Pod {
	if d, err := state.Read(viewKey); err == nil {
		if v, ok := d.(*viewState); ok && v.pod.UID == pod.UID {
			return v.pod
		}
	}
	return w.view(pod)
}

func (w *HiveSchedDRA) EventsToRegister(ctx context.Context) ([]fwk.ClusterEventWithHint, error) {
	return w.inner.EventsToRegister(ctx)
}

func (w *HiveSchedDRA) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	return w.inner.PreEnqueue(ctx, w.view(pod))
}

func (w *HiveSchedDRA) SignPod(ctx context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return w.inner.SignPod(ctx, w.view(pod))
}

func (w *HiveSchedDRA) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	v := w.view(pod)
	state.Write(viewKey, &viewState{pod: v})
	return w.inner.PreFilter(ctx, state, v, nodes)
}

func (w *HiveSchedDRA) PreFilterExtensions() fwk.PreFilterExtensions {
	return w.inner.PreFilterExtensions()
}

// Filter runs DynamicResources on the view; and refuses a pod that asks for
// the leaf cell resource on a node that offers its GPUs only through DRA
// (no such resource in its allocatable, and a DeviceClass maps it):
// DynamicResources would allocate devices of its own choosing there, and
// the view hides the resource from it.
func (w *HiveSchedDRA) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	if hs := w.hivesched(); hs != nil && hs.dra != nil && dra.RequestsResource(pod, hs.resource) &&
		nodeInfo.GetAllocatable().GetScalarResources()[hs.resource] == 0 {
		if dm := w.handle.SharedDRAManager(); dm != nil && dm.DeviceClassResolver().GetDeviceClass(hs.resource) != nil {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
				"node %s offers its GPUs only through DRA (no %s in its allocatable): ask for them with a ResourceClaim (template) of a GPU DeviceClass", nodeInfo.Node().Name, hs.resource))
		}
	}
	return w.inner.Filter(ctx, state, w.cachedView(state, pod), nodeInfo)
}

func (w *HiveSchedDRA) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	return w.inner.PostFilter(ctx, state, w.cachedView(state, pod), m)
}

// PodGroupPostFilter is DynamicResources' own: it works on the states its
// members' PreFilter (on their views) left. When no member got as far as
// its PreFilter (HiveSched refused the group first, in its placement
// generation: the VC is full, the gang waits), there is nothing of
// DynamicResources' to undo, and its
// own PodGroupPostFilter would fail the cycle with an error ("not found",
// its pod-group state missing) that hides the members' reason from their
// events and sends the group into error backoff.
func (w *HiveSchedDRA) PodGroupPostFilter(ctx context.Context, state fwk.PodGroupCycleState, pg fwk.PodGroupInfo, f fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	if state != nil {
		if _, err := state.Read(draStateKey); err != nil {
			return nil, fwk.NewStatus(fwk.Unschedulable)
		}
	}
	return w.inner.PodGroupPostFilter(ctx, state, pg, f)
}

// draStateKey is the key DynamicResources keeps its state under (its
// name), in a pod's cycle state and in its pod group's.
const draStateKey = fwk.StateKey(names.DynamicResources)

func (w *HiveSchedDRA) Score(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	return w.inner.Score(ctx, state, w.cachedView(state, pod), nodeInfo)
}

func (w *HiveSchedDRA) ScoreExtensions() fwk.ScoreExtensions { return w.inner.ScoreExtensions() }

// Reserve is DynamicResources' (its allocations go in flight in the
// shared DRA manager); the devices it allocated are handed to HiveSched's
// core at once, so that its next decision places nothing on them before
// they are written.
func (w *HiveSchedDRA) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	v := w.cachedView(state, pod)
	st := w.inner.Reserve(ctx, state, v, node)
	if hs := w.hivesched(); hs != nil && hs.dra != nil && len(v.Spec.ResourceClaims) > 0 && st.IsSuccess() {
		hs.notePending(klog.FromContext(ctx), v, false)
	}
	return st
}

func (w *HiveSchedDRA) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string) {
	v := w.cachedView(state, pod)
	w.inner.Unreserve(ctx, state, v, node)
	if hs := w.hivesched(); hs != nil && hs.dra != nil && len(v.Spec.ResourceClaims) > 0 {
		hs.notePending(klog.FromContext(ctx), v, true)
	}
}

func (w *HiveSchedDRA) PreBindPreFlight(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	return w.inner.PreBindPreFlight(ctx, state, w.cachedView(state, pod), node)
}

func (w *HiveSchedDRA) PreBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, node string) *fwk.Status {
	return w.inner.PreBind(ctx, state, w.cachedView(state, pod), node)
}
