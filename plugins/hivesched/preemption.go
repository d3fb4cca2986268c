package hivesched

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/apis/scheduling"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
)

// PreemptionName is the name of the DefaultPreemption wrapper in
// KubeSchedulerConfiguration: a hivesched profile disables DefaultPreemption
// and enables HiveSchedPreemption in its place (manifests/scheduler).
const PreemptionName = "HiveSchedPreemption"

// HiveSchedPreemption is Kubernetes' DefaultPreemption, unmodified, for the
// pods and pod groups HiveSched does not place: a plain pod (no leaf cells,
// no VC, not a member of a hivesched gang) preempts exactly as upstream
// (PDBs, preemptionPolicy Never, nominated nodes, the DisruptionTarget
// condition on victims, async preemption, and for Workload API pod groups
// workload-aware preemption). HiveSched's own pods are preempted for by
// HiveSched (whole gangs, inside the VC), never by this plugin.
//
// Its victims never include a pod HiveSched placed, but for a preemptor of
// system-critical priority (system-cluster-critical, system-node-critical:
// DNS, a CNI or device-plugin DaemonSet pod that must run on that node). Such
// a victim's gang does not stay partly running: HiveSched deletes its other
// members when it sees the victim go (lostMember, docs/plugin.md
// "Preemption by other plugins and schedulers"). Any other pod, whatever its
// PriorityClass, cannot take a VC's cells or break a gang: the VC's guarantee
// is only HiveSched's to trade, by its priorities inside the VC.
type HiveSchedPreemption struct {
	*defaultpreemption.DefaultPreemption
	handle fwk.Handle

	once sync.Once
	hs   *HiveSched
}

var (
	_ fwk.PreEnqueuePlugin         = &HiveSchedPreemption{}
	_ fwk.PostFilterPlugin         = &HiveSchedPreemption{}
	_ fwk.PodGroupPostFilterPlugin = &HiveSchedPreemption{}
	_ fwk.EnqueueExtensions        = &HiveSchedPreemption{}
)

// NewPreemption builds the wrapper around DefaultPreemption, with
// DefaultPreemption's default args (HiveSchedPreemption takes none).
func NewPreemption(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	// DefaultPreemptionArgs' defaults (pkg/scheduler/apis/config/v1).
	args := &schedconfig.DefaultPreemptionArgs{MinCandidateNodesPercentage: 10, MinCandidateNodesAbsolute: 100}
	inner, err := defaultpreemption.New(ctx, args, h, fts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", PreemptionName, err)
	}
	w := &HiveSchedPreemption{DefaultPreemption: inner, handle: h}
	inner.IsEligiblePod = w.eligibleVictim
	return w, nil
}

// Name returns the plugin name.
func (w *HiveSchedPreemption) Name() string { return PreemptionName }

// hivesched is the profile's HiveSched (nil: the profile has none, and this
// is DefaultPreemption).
func (w *HiveSchedPreemption) hivesched() *HiveSched {
	w.once.Do(func() {
		if v, ok := profiles.Load(w.handle); ok {
			w.hs = v.(*HiveSched)
		}
	})
	return w.hs
}

// PostFilter preempts for a pod HiveSched does not place, as upstream does.
// HiveSched's PreFilter left its state for every pod it places (refused,
// placed, or preempting): those are HiveSched's PostFilter's.
func (w *HiveSchedPreemption) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if w.hivesched() != nil && readState(state) != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	return w.DefaultPreemption.PostFilter(ctx, state, pod, m)
}

// PodGroupPostFilter preempts for a pod group none of whose members HiveSched
// places (a hivesched gang is HiveSched's PodGroupPostFilter's).
func (w *HiveSchedPreemption) PodGroupPostFilter(ctx context.Context, state fwk.PodGroupCycleState, pg fwk.PodGroupInfo, f fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	if hs := w.hivesched(); hs != nil {
		for _, pod := range podGroupPods(pg) {
			if req, err := hs.request(pod); err != nil || req != nil {
				return nil, fwk.NewStatus(fwk.Unschedulable)
			}
		}
	}
	return w.DefaultPreemption.PodGroupPostFilter(ctx, state, pg, f)
}

// eligibleVictim is DefaultPreemption's IsEligiblePod: a victim unit (a pod,
// or a Workload API pod group) with a pod HiveSched placed is eligible only
// for a system-critical preemptor (see HiveSchedPreemption).
func (w *HiveSchedPreemption) eligibleVictim(_ fwk.NodeInfo, victim preemption.Victim, preemptor *v1.Pod) bool {
	hs := w.hivesched()
	if hs == nil || corev1helpers.PodPriority(preemptor) >= scheduling.SystemCriticalPriority {
		return true
	}
	for _, pi := range victim.Pods() {
		if hs.placedByUs(pi.GetPod()) {
			return false
		}
	}
	return true
}

// placedByUs: the pod is a member of a group HiveSched tracks (its cells are
// the core's, or it is a member of a hivesched gang).
func (p *HiveSched) placedByUs(pod *v1.Pod) bool {
	return p.groups.GroupOf(pod) != ""
}
