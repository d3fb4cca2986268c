package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/utils/ptr"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/plugins/placement"
)

// The pod-group cycle tests read what the scheduler's cell core holds
// through the inspect API (withInspect): its single-group and single-VC
// answers are built from the core on each request, not cached, and not
// from the VirtualCluster status the scheduler writes every second.

// inspectRead GETs an inspect API path as token into out; the status code,
// or an error. For callers outside the test's goroutine (no t).
func inspectRead(ctx context.Context, token, addr, path string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+iv1.PathPrefix+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, json.Unmarshal(body, out)
}

// coreView is what the core holds for one group and its VC.
type coreView struct {
	State  string // the group's state in the core, "" if it does not know it
	Placed int    // the group's pods with cells
	Used   int32  // the VC's used leaf cells
	At     string // when it was read (for failure messages)
}

func (v coreView) holdsNothing() bool { return v.State != "Allocated" && v.Placed == 0 && v.Used == 0 }

// readCore reads the core's view of group ns/name and of vc.
func (c *cluster) readCore(ctx context.Context, addr, group, vc string) (coreView, error) {
	var v coreView
	var g iv1.AffinityGroup
	code, err := inspectRead(ctx, c.cfg.BearerToken, addr, "affinitygroups/"+group, &g)
	switch {
	case err != nil:
		return v, err
	case code == http.StatusOK:
		v.State = g.State
		for _, p := range g.Pods {
			if p.Node != "" {
				v.Placed++
			}
		}
	case code != http.StatusNotFound:
		return v, fmt.Errorf("affinitygroups/%s: HTTP %d", group, code)
	}
	var vcv iv1.VirtualCluster
	if code, err = inspectRead(ctx, c.cfg.BearerToken, addr, "virtualclusters/"+vc, &vcv); err != nil || code != http.StatusOK {
		return v, fmt.Errorf("virtualclusters/%s: HTTP %d: %v", vc, code, err)
	}
	v.Used = vcv.LeafCells.Used
	return v, nil
}

// coreUsedIs waits until the core (not the VC's status) counts used leaf
// cells of vc: for counts that converge, as when pods are deleted.
func (c *cluster) coreUsedIs(t *testing.T, addr, vc string, used int32) {
	t.Helper()
	var last iv1.VirtualCluster
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		code, err := inspectRead(ctx, c.cfg.BearerToken, addr, "virtualclusters/"+vc, &last)
		return err == nil && code == http.StatusOK && last.LeafCells.Used == used, nil
	})
	require.NoError(t, err, "the core counts %d used leaf cells of %s, want %d", last.LeafCells.Used, vc, used)
}

// requireCoreAgrees checks the bound pods of namespace ns against the
// core's own placements (inspect API): each bound pod is in the core's
// group its record names, on the node and devices the core holds for it,
// and no (node, device) is in two live pods. It returns how many are bound.
func (c *cluster) requireCoreAgrees(t *testing.T, addr, ns string) (bound int) {
	t.Helper()
	pods, err := c.kube.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	seen := map[string]string{}
	groups := map[string]map[string]iv1.Pod{} // group -> pod -> the core's placement
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			continue
		}
		rec, err := placement.Decode(p.Annotations[hivesched.AnnotationPlacement])
		require.NoError(t, err, "bound pod %s has no placement record", p.Name)
		if groups[rec.Group] == nil {
			var g iv1.AffinityGroup
			require.Equal(t, http.StatusOK, c.inspectGet(t, addr, "affinitygroups/"+rec.Group, &g), "the core does not know group %s of bound pod %s", rec.Group, p.Name)
			require.Equal(t, "Allocated", g.State, "group %s", rec.Group)
			groups[rec.Group] = map[string]iv1.Pod{}
			for _, pp := range g.Pods {
				if pp.Name != "" {
					groups[rec.Group][pp.Name] = pp
				}
			}
		}
		held, ok := groups[rec.Group][ns+"/"+p.Name]
		require.True(t, ok, "the core holds no slot of group %s for bound pod %s", rec.Group, p.Name)
		require.Equal(t, held.Node, p.Spec.NodeName, "pod %s bound to %s, the core holds its cells on %s", p.Name, p.Spec.NodeName, held.Node)
		require.Equal(t, indices(held.LeafCellIndices), p.Annotations[hivesched.AnnotationLeafCellIndices], "pod %s: its devices and the core's", p.Name)
		require.Equal(t, held.Node, rec.Node, "pod %s: its record and the core", p.Name)
		for _, i := range held.LeafCellIndices {
			k := fmt.Sprintf("%s/%d", p.Spec.NodeName, i)
			require.Empty(t, seen[k], "device %s is in pods %s and %s", k, seen[k], p.Name)
			seen[k] = p.Name
		}
		bound++
	}
	return bound
}

func indices(ix []int32) string {
	s := make([]string, len(ix))
	for i, x := range ix {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// withExtraPlugin registers a test plugin (a fault injector, an observer)
// with the scheduler and enables it at the named extension points: after
// the profile's multiPoint plugins (HiveSched's), as kube-scheduler orders
// plugins enabled at one extension point only.
func withExtraPlugin(name string, pl fwk.Plugin, extensionPoints ...string) profileOption {
	return func(profile map[string]any) {
		plugins := profile["plugins"].(map[string]any)
		for _, ep := range extensionPoints {
			set, _ := plugins[ep].(map[string]any)
			if set == nil {
				set = map[string]any{}
				plugins[ep] = set
			}
			enabled, _ := set["enabled"].([]any)
			set["enabled"] = append(enabled, map[string]any{"name": name})
		}
		extra, _ := profile[extraPluginsKey].([]app.Option)
		profile[extraPluginsKey] = append(extra, app.WithPlugin(name, func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
			return pl, nil
		}))
	}
}

// cycleEnds records what the core holds for a Workload API pod group when
// each of its pod-group cycles starts, that is what its previous cycle
// left: a PreFilter plugin the profile runs before HiveSched's (multiPoint
// order), reading the core on the first PreFilter of each cycle of the
// group. Only one scheduling cycle runs at a time, and nothing of
// hivesched's runs between the end of one and the start of the next but
// the requeue of the failed pods (PreEnqueue) and, for an idle scheduler,
// the 30 s hold janitor (the pods here are retried within the framework's
// 10 s maximum backoff).
type cycleEnds struct {
	c     *cluster
	addr  string
	group string // namespace/name of the pod group
	vc    string

	mu     sync.Mutex
	last   fwk.PodGroupCycleState
	views  []coreView
	failed []error
	// count, when set, is read with each view (the PermitRejector's
	// rejections, say).
	count  func() int64
	counts []int64
}

func newCycleEnds(c *cluster, addr, group, vc string) *cycleEnds {
	return &cycleEnds{c: c, addr: addr, group: group, vc: vc}
}

func (o *cycleEnds) Name() string { return "CycleEnds" }

// watch starts recording the cycles of another pod group.
func (o *cycleEnds) watch(group string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.group, o.last, o.views, o.failed, o.counts = group, nil, nil, nil, nil
}

// PreFilter records and skips: it never refuses a pod.
func (o *cycleEnds) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	cycle := state.GetPodGroupSchedulingCycle()
	if cycle == nil || pod.Spec.SchedulingGroup == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if pod.Namespace+"/"+ptr.Deref(pod.Spec.SchedulingGroup.PodGroupName, "") != o.group {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if cycle == o.last {
		return nil, fwk.NewStatus(fwk.Skip) // a later member of the same cycle
	}
	o.last = cycle
	v, err := o.c.readCore(ctx, o.addr, o.group, o.vc)
	if err != nil {
		o.failed = append(o.failed, err)
		return nil, fwk.NewStatus(fwk.Skip)
	}
	v.At = time.Now().Format("15:04:05.000000")
	o.views = append(o.views, v)
	if o.count != nil {
		o.counts = append(o.counts, o.count())
	}
	return nil, fwk.NewStatus(fwk.Skip)
}

func (o *cycleEnds) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// EventsToRegister: none. It rejects no pod, so no event should requeue
// one for it.
func (o *cycleEnds) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{}, nil
}

// SignPod signs every pod with nothing of its own: the profile keeps
// opportunistic batching as it has it without the observer.
func (o *cycleEnds) SignPod(context.Context, *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return nil, nil
}

// withCycleEnds runs the observer's PreFilter before HiveSched's.
func withCycleEnds(o *cycleEnds) profileOption {
	return func(profile map[string]any) {
		mp := profile["plugins"].(map[string]any)["multiPoint"].(map[string]any)
		var enabled []any
		for _, e := range mp["enabled"].([]any) {
			if e.(map[string]any)["name"] == hivesched.Name {
				enabled = append(enabled, map[string]any{"name": o.Name()})
			}
			enabled = append(enabled, e)
		}
		mp["enabled"] = enabled
		extra, _ := profile[extraPluginsKey].([]app.Option)
		profile[extraPluginsKey] = append(extra, app.WithPlugin(o.Name(), func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
			return o, nil
		}))
	}
}

// requireHeldNothing waits until n cycles of the group started (so n-1
// ended), and checks that when each started the core held no cells for
// the group and none of the VC's.
func (o *cycleEnds) requireHeldNothing(t *testing.T, pods []*v1.Pod, n int) {
	t.Helper()
	seen := func() int {
		o.mu.Lock()
		defer o.mu.Unlock()
		return len(o.views)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return seen() >= n, nil
	})
	require.NoError(t, err, "%d cycles of %s started, want %d: %s", seen(), o.group, n, o.c.describe(t, pods))
	o.mu.Lock()
	defer o.mu.Unlock()
	require.Empty(t, o.failed, "reading the core when a cycle started")
	for i, v := range o.views {
		require.True(t, v.holdsNothing(), "when cycle %d of %s started, the core held %+v (all: %+v)", i, o.group, v, o.views)
	}
}

// TestPodGroupCycleGang (issue 31): a gang of 4 pods in one Workload API pod
// group goes through 1.37's pod-group cycle (simulated Reserve, Unreserve of
// every member, then the real Reserve, Permit and binding) and binds whole
// on the cells the core holds for it.
func TestPodGroupCycleGang(t *testing.T) {
	c := startWorkloadCluster(t)
	c.createNodes(t, "pgc", 2, 4, 0)
	c.createNamespace(t, "pgc")
	c.createVC(t, "pgc-vc", []string{"pgc"}, "V100-RACK", 1)
	addr := freeAddr(t)
	c.startScheduler(t, physicalCluster("pgc", 2, 4, 0), withInspect(addr))

	c.createPodGroup(t, "pgc", "train", 4, map[string]string{hivesched.LabelVirtualCluster: "pgc-vc"})
	pods := workloadPods("pgc", "train", "", 4, 8)
	c.createPods(t, pods)
	nodes := c.waitBound(t, pods, 60*time.Second)
	rack := ""
	for _, n := range nodes {
		r := strings.Split(n, "-")[1]
		require.True(t, rack == "" || rack == r, "gang split over racks: %v", nodes)
		rack = r
	}
	require.Equal(t, 4, c.requireCoreAgrees(t, addr, "pgc"))
	v, err := c.readCore(t.Context(), addr, "pgc/train", "pgc-vc")
	require.NoError(t, err)
	require.Equal(t, coreView{State: "Allocated", Placed: 4, Used: 32}, v)
	ag := c.waitAG(t, "pgc", "train", phaseIs(hv1.AffinityGroupRunning))
	require.Equal(t, []hv1.AffinityGroupMember{{PodNumber: 4, LeafCellNumber: 8}}, ag.Spec.Members)
	// The framework wrote the PodGroup's condition, as for its own gangs.
	require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		pg, err := c.kube.SchedulingV1beta1().PodGroups("pgc").Get(ctx, "train", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range pg.Status.Conditions {
			if cond.Type == schedv1beta1.PodGroupInitiallyScheduled && cond.Status == metav1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}))
	c.deletePods(t, pods)
	c.waitGone(t, pods, 30*time.Second)
	c.coreUsedIs(t, addr, "pgc-vc", 0)
}

// TestPodGroupCycleNoFit (issue 31): a group that fails in its pod-group
// cycle holds no cells when the cycle ends, every time, whether the core
// could not place it or placed it and another plugin then refused one
// member's node; read from the core at the end of each of its cycles, while
// its pods still wait.
func TestPodGroupCycleNoFit(t *testing.T) {
	c := startWorkloadCluster(t)
	c.createNodes(t, "nf", 1, 4, 0)
	c.createNamespace(t, "nf")
	c.createVC(t, "nf-vc", []string{"nf"}, "V100-RACK", 1)
	addr := freeAddr(t)
	ends := newCycleEnds(c, addr, "", "nf-vc")
	c.startScheduler(t, physicalCluster("nf", 1, 4, 0), withInspect(addr), withCycleEnds(ends))
	// Wait until the scheduler is up (its core knows the VC) before the
	// PodGroup and its pods exist.
	c.coreUsedIs(t, addr, "nf-vc", 0)
	vcLabel := map[string]string{hivesched.LabelVirtualCluster: "nf-vc"}

	t.Run("larger than its VC", func(t *testing.T) {
		ends.watch("nf/big")
		c.createPodGroup(t, "nf", "big", 5, vcLabel)
		pods := workloadPods("nf", "big", "", 5, 8)
		// Created last first: only the member a cycle tries first says
		// why, and that is the first the scheduler's pod informer
		// delivered (big-4 here, once the informer runs; any of them for
		// pods its initial list brings), not pods[0] (gangRefused).
		c.createPods(t, reversed(pods))
		c.gangRefused(t, pods, `affinity group "nf/big"`, 30*time.Second)
		ends.requireHeldNothing(t, pods, 3) // two cycles ended
		c.requireUnbound(t, pods, time.Second)
		c.deletePods(t, pods)
		c.waitGone(t, pods, 30*time.Second)
	})

	t.Run("placed, then a member's node refused by another plugin", func(t *testing.T) {
		ends.watch("nf/picky")
		c.createPodGroup(t, "nf", "picky", 4, vcLabel)
		pods := workloadPods("nf", "picky", "", 4, 8)
		// No node has this label: NodeAffinity refuses whatever node the
		// core chose for the member.
		pods[2].Spec.NodeSelector = map[string]string{"example.com/nowhere": "true"}
		c.createPods(t, pods)
		// Every cycle places the group, fails on member 2 and gives the
		// cells back before the next cycle can start.
		ends.requireHeldNothing(t, pods, 3)
		c.requireUnbound(t, pods, time.Second)
		// While its pods still wait, a gang that needs the whole VC binds
		// on the cells the core holds for it, and the picky group holds
		// none.
		c.createPodGroup(t, "nf", "whole", 4, vcLabel)
		whole := workloadPods("nf", "whole", "", 4, 8)
		c.createPods(t, whole)
		c.waitBound(t, whole, 60*time.Second)
		require.Equal(t, 4, c.requireCoreAgrees(t, addr, "nf"))
		v, err := c.readCore(t.Context(), addr, "nf/picky", "nf-vc")
		require.NoError(t, err)
		require.Equal(t, 0, v.Placed, "the picky group, its VC full: %+v", v)
		require.NotEqual(t, "Allocated", v.State)
		c.deletePods(t, append(pods, whole...))
		c.waitGone(t, append(pods, whole...), 30*time.Second)
		c.coreUsedIs(t, addr, "nf-vc", 0)
	})
}

// permitRejector is a fault injector for the Permit step: it rejects pods
// labelled rejectPermitLabel, as a plugin whose quota check fails would.
type permitRejector struct{ rejected atomic.Int64 }

const rejectPermitLabel = "test.hivesched.io/reject-permit"

func (*permitRejector) Name() string { return "PermitRejector" }

func (r *permitRejector) Permit(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) (*fwk.Status, time.Duration) {
	if _, ok := pod.Labels[rejectPermitLabel]; ok {
		r.rejected.Add(1)
		return fwk.NewStatus(fwk.Unschedulable, "rejected by the test's PermitRejector"), 0
	}
	return nil, 0
}

// TestPodGroupCycleRejectedPermit (issue 31): a member rejected at Permit
// in the cycle's binding step releases the whole group: no member binds
// and, whenever its pods are requeued, the core holds no cells for it.
func TestPodGroupCycleRejectedPermit(t *testing.T) {
	c := startWorkloadCluster(t)
	c.createNodes(t, "rp", 1, 4, 0)
	c.createNamespace(t, "rp")
	c.createVC(t, "rp-vc", []string{"rp"}, "V100-RACK", 1)
	addr := freeAddr(t)
	rejector := &permitRejector{}
	ends := newCycleEnds(c, addr, "rp/gang", "rp-vc")
	ends.count = rejector.rejected.Load
	c.startScheduler(t, physicalCluster("rp", 1, 4, 0), withInspect(addr),
		withExtraPlugin(rejector.Name(), rejector, "permit"), withCycleEnds(ends))

	c.createPodGroup(t, "rp", "gang", 4, map[string]string{hivesched.LabelVirtualCluster: "rp-vc"})
	pods := workloadPods("rp", "gang", "", 4, 8)
	pods[1].Labels[rejectPermitLabel] = "true"
	c.createPods(t, pods)
	c.waitEvent(t, pods[1], "rejected by the test's PermitRejector", 30*time.Second)
	ends.requireHeldNothing(t, pods, 3)
	ends.mu.Lock()
	rejections := ends.counts[len(ends.counts)-1]
	ends.mu.Unlock()
	require.Positive(t, rejections, "a cycle started after a rejection at Permit")
	c.requireUnbound(t, pods, time.Second)
}

// filterFault is a fault injector for Filter: while on, it fails pods
// labelled filterFaultLabel with an error (not a rejection), as a plugin
// whose API call failed would. A pod group whose member errs fails its
// cycle with Error, for which the framework runs no PodGroupPostFilter.
type filterFault struct{ on atomic.Bool }

const filterFaultLabel = "test.hivesched.io/filter-error"

func (*filterFault) Name() string { return "FilterFault" }

// EventsToRegister: none (as cycleEnds): an error is retried with backoff.
func (*filterFault) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{}, nil
}

func (f *filterFault) Filter(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ fwk.NodeInfo) *fwk.Status {
	if _, ok := pod.Labels[filterFaultLabel]; ok && f.on.Load() {
		return fwk.AsStatus(errors.New("injected filter error"))
	}
	return nil
}

// TestPodGroupCycleErrorReleases (issue 31): a pod group whose cycle ends
// with Error (another plugin's Filter failed on a member after the core
// placed the group) holds no cells when the cycle ends: the framework runs
// no PodGroupPostFilter then, and requeues the pods through PreEnqueue,
// where hivesched releases what the cycle held. Once the error is gone the
// group binds on the core's cells.
func TestPodGroupCycleErrorReleases(t *testing.T) {
	c := startWorkloadCluster(t)
	c.createNodes(t, "er", 1, 4, 0)
	c.createNamespace(t, "er")
	c.createVC(t, "er-vc", []string{"er"}, "V100-RACK", 1)
	addr := freeAddr(t)
	fault := &filterFault{}
	fault.on.Store(true)
	ends := newCycleEnds(c, addr, "er/gang", "er-vc")
	c.startScheduler(t, physicalCluster("er", 1, 4, 0), withInspect(addr),
		withExtraPlugin(fault.Name(), fault, "filter"), withCycleEnds(ends))

	c.createPodGroup(t, "er", "gang", 4, map[string]string{hivesched.LabelVirtualCluster: "er-vc"})
	pods := workloadPods("er", "gang", "", 4, 8)
	pods[3].Labels[filterFaultLabel] = "true"
	c.createPods(t, pods)
	c.waitEvent(t, pods[3], "injected filter error", 30*time.Second)
	ends.requireHeldNothing(t, pods, 3) // two failed cycles ended
	c.requireUnbound(t, pods, time.Second)

	fault.on.Store(false)
	c.waitBound(t, pods, 60*time.Second)
	require.Equal(t, 4, c.requireCoreAgrees(t, addr, "er"))
}

// TestPodGroupCycleChurn (issue 31): 200 pod-group gangs of 1 to 4 pods
// mixed with single pods, deleted as they bind, leave the core and the API
// server in agreement: every bound pod on the core's cells for it, no
// device in two pods, and the core's used count of the VC equal to the
// bound pods' GPUs.
func TestPodGroupCycleChurn(t *testing.T) {
	c := startWorkloadCluster(t)
	c.createNodes(t, "ch", 2, 4, 0)
	c.createNamespace(t, "ch")
	c.createVC(t, "ch-vc", []string{"ch"}, "V100-RACK", 2)
	addr := freeAddr(t)
	c.startScheduler(t, physicalCluster("ch", 2, 4, 0), withInspect(addr))
	vcLabel := map[string]string{hivesched.LabelVirtualCluster: "ch-vc"}

	var live [][]*v1.Pod
	for i := 0; i < 200; i++ {
		name := fmt.Sprintf("g%d", i)
		// Any 6 consecutive gangs and their single pods fit the VC's 64
		// GPUs: the last ones must all bind.
		n, gpus := 1+i%4, int64([]int{1, 2, 2, 4}[i%4])
		c.createPodGroup(t, "ch", name, int32(n), vcLabel)
		pods := workloadPods("ch", name, "", n, gpus)
		c.createPods(t, pods)
		if i%3 == 0 {
			single := gangPods("ch", fmt.Sprintf("single%d", i), "ch-vc", 0, 1, 2)
			delete(single[0].Labels, hivesched.LabelAffinityGroup)
			delete(single[0].Annotations, hivesched.AnnotationGroupMembers)
			c.createPods(t, single)
			live = append(live, single)
		}
		live = append(live, pods)
		for len(live) > 6 {
			// The oldest goes, bound or not: the cluster churns.
			c.deletePods(t, live[0])
			live = live[1:]
		}
	}
	var rest []*v1.Pod
	for _, g := range live {
		rest = append(rest, g...)
	}
	c.waitBound(t, rest, 120*time.Second)
	var gpus int32
	for _, p := range rest {
		q := p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]
		gpus += int32(q.Value())
	}
	// The deleted pods' cells go back as the informer sees them go.
	c.coreUsedIs(t, addr, "ch-vc", gpus)
	require.Equal(t, len(rest), c.requireCoreAgrees(t, addr, "ch"))
}
