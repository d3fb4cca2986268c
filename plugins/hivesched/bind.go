package hivesched

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/selfcheck"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/hivesched/hivesched/plugins/binding"
	"github.com/hivesched/hivesched/plugins/metrics"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// binds is the binding path's state beyond the core's decision: the pacing
// of gangs' bindings, their failures, and who binds first.
type binds struct {
	gate    *binding.Gate    // paces the binding calls by whole gangs (nil: no limit)
	retries *binding.Retries // binding failures per group (maxBindAttempts)
	evictor *binding.Evictor // deletes the bound members of a placement given up
	order   sync.Once        // decides first on first use
	first   bool             // HiveSched's Bind runs first: it writes the placement
}

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
	p.binds.gate.Forget(group)
	p.binds.retries.Forget(group)
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
		p.binds.gate.Expect(s.group, len(waiting)+1)
	}
	for _, wp := range waiting {
		wp.Allow(Name)
	}
	return nil, 0
}

// placementAnnotations assigns the pod its leaf cells inside its group's
// allocation (AG e3's cell side) and returns the annotations that persist the
// placement (read back by recovery, ec) and the pod's device indices.
//
// A member without leaf cells is recorded too, with its node and no cells:
// it is its gang's member for a restarted scheduler (recovery), whose
// whole gang goes when any of it goes.
func (p *HiveSched) placementAnnotations(s *cycleState, pod *v1.Pod, nodeName string) (map[string]string, error) {
	req, err := p.request(pod)
	if err != nil || req == nil {
		return nil, fmt.Errorf("pod spec changed during binding: %v", err)
	}
	pp := cellcore.PodPlacement{Node: nodeName}
	if !s.cellLess {
		if pp, err = p.core.AssignPod(s.group, podrequest.PodKey(pod), s.leaves); err != nil {
			return nil, err
		}
	}
	rec := placement.NewRecord(req.Group, pp, p.groupDowngraded(s.group))
	rec.CellLessPods = req.CellLessPods
	rec.Claims = s.claims
	return p.signer.Annotations(pod, rec, req.Hived), nil
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
	ann, err := p.placementAnnotations(s, pod, nodeName)
	if err != nil {
		return fwk.AsStatus(err)
	}
	// An opportunistic gang binds in the room guaranteed ones leave
	// (plugins/binding, Gate).
	req, _, _ := p.groups.Cached(pod)
	opportunistic := req != nil && req.Group.Priority == cellcore.OpportunisticPriority
	if err := p.binds.gate.Acquire(ctx, s.group, opportunistic); err != nil {
		return fwk.AsStatus(fmt.Errorf("binding pod %s/%s: waiting for its gang's turn: %w", pod.Namespace, pod.Name, err))
	}
	// The gate learns from the call's own duration, not from the wait
	// before it: that is the API server's latency (plugins/binding,
	// gate_adaptive.go).
	start := time.Now()
	defer func() {
		took := time.Since(start)
		p.binds.gate.Release(s.group, took)
		metrics.BindingCall(p.schedulerName, took)
	}()
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Annotations: ann},
		Target:     v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if c := p.handle.APICacher(); c != nil {
		onFinish, err := c.BindPod(binding)
		if err == nil {
			err = c.WaitOnFinish(ctx, onFinish)
		}
		p.ownWrite(pod, selfcheck.WriteBinding, "", err)
		if err != nil {
			s.bindErr = err
			return fwk.AsStatus(fmt.Errorf("binding pod %s/%s: %w", pod.Namespace, pod.Name, err))
		}
		return nil
	}
	err = p.handle.ClientSet().CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	p.ownWrite(pod, selfcheck.WriteBinding, "", err)
	if err != nil {
		s.bindErr = err
		return fwk.AsStatus(fmt.Errorf("binding pod %s/%s: %w", pod.Namespace, pod.Name, err))
	}
	return nil
}

// PostBind forgets the member's binding failures: it is bound.
func (p *HiveSched) PostBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	if s := readState(state); s != nil && s.group != "" {
		s.bindErr = nil
		p.binds.retries.Bound(s.group, pod.UID)
		if s.gpuClaims && p.groups.BoundCount(s.group) >= p.groups.MemberCount(s.group) {
			// Every member's claims are written: nothing is in flight.
			p.dra.DropSignal(s.group)
		}
	}
}

// PreBind is the fallback for a profile where another bind plugin runs before
// HiveSched's Bind: it patches the placement onto the pod before that plugin
// binds it (two API writes per pod instead of one).
//
// For a pod with GPU claims it first allocates them (dra.State): each claim's
// finalizer, allocation and reservation for the pod, written before the pod
// is bound (two API writes per claim; none for a claim a retried binding
// wrote already).
func (p *HiveSched) PreBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s := readState(state)
	if s == nil {
		return nil
	}
	if s.gpuClaims {
		pp, err := p.core.AssignPod(s.group, podrequest.PodKey(pod), s.leaves)
		if err != nil {
			return fwk.AsStatus(err)
		}
		if s.claims, err = p.dra.AllocateClaims(ctx, pod, pp); err != nil {
			s.bindErr = err
			return fwk.AsStatus(fmt.Errorf("GPU claims of pod %s/%s: %w", pod.Namespace, pod.Name, err))
		}
	}
	if p.bindsFirst() {
		return nil
	}
	ann, err := p.placementAnnotations(s, pod, nodeName)
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
// only for our pods, and only when they have GPU claims or HiveSched is not
// the profile's first binder.
func (p *HiveSched) PreBindPreFlight(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	s := readState(state)
	if s == nil || (p.bindsFirst() && !s.gpuClaims) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return nil, nil
}

// bindsFirst reports whether HiveSched's Bind is the first bind plugin of its
// profile. The framework orders plugins only after every plugin is built, so
// this is decided on first use, not in New.
func (p *HiveSched) bindsFirst() bool {
	p.binds.order.Do(func() {
		lister, ok := p.handle.(interface{ ListPlugins() *schedconfig.Plugins })
		if !ok {
			return
		}
		if pl := lister.ListPlugins(); pl != nil && len(pl.Bind.Enabled) > 0 && pl.Bind.Enabled[0].Name == Name {
			p.binds.first = true
		}
		if !p.binds.first {
			klog.Background().Info("HiveSched is not the first bind plugin of its profile: placements are written by an extra pod patch in PreBind; list HiveSched under plugins.bind.enabled for one write per pod", "profile", p.schedulerName)
		}
	})
	return p.binds.first
}

func (p *HiveSched) annotate(ctx context.Context, pod *v1.Pod, ann map[string]string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	_, err = p.handle.ClientSet().CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	p.ownWrite(pod, selfcheck.WritePlacement, "", err)
	if err != nil {
		return fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
