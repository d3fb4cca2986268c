package chaos

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/cmd/hivesched-sim/sim"
	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/test/util"
)

// The checks must catch what they are for: each is fed a snapshot with the
// fault it looks for (and one without). No cluster is needed.

// sampleVCs are manifests/samples/virtualclusters.yaml.
func sampleVCs() []hv1.VirtualCluster {
	return []hv1.VirtualCluster{
		{ObjectMeta: metav1.ObjectMeta{Name: "vc-vision"}, Spec: hv1.VirtualClusterSpec{AllowedNamespaces: []string{"vision"},
			VirtualCells: []hv1.VirtualCellSpec{{CellType: "V100-RACK", CellNumber: 1}}, PinnedCells: []hv1.PinnedCellSpec{{PinnedCellID: "pinned-b3"}}, Limits: sampleLimits()}},
		{ObjectMeta: metav1.ObjectMeta{Name: "vc-speech"}, Spec: hv1.VirtualClusterSpec{AllowedNamespaces: []string{"speech"},
			VirtualCells: []hv1.VirtualCellSpec{{CellType: "V100-RACK.V100-NODE", CellNumber: 3}, {CellType: "T4-NODE", CellNumber: 1}}, Limits: sampleLimits()}},
	}
}

// sampleLimits bound every namespace's priority at 100, as the samples do.
func sampleLimits() []hv1.NamespaceLimits {
	return []hv1.NamespaceLimits{{Namespace: "*", MaxPriority: ptr.To[int32](100)}}
}

func testHarness(t *testing.T) *harness {
	cfg, err := sim.LoadCluster("../../manifests/scheduler/config-second-scheduler.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, o: options{gangWindow: 2 * time.Second}, cfg: cfg, key: []byte("test key"),
		episodes: map[string]map[string]*episode{}}
	if h.caps, err = capacities(cfg, sampleVCs()); err != nil {
		t.Fatal(err)
	}
	return h
}

// member returns pod i of a gang, bound to node on the given devices with a
// signed record, or pending when node is "".
func (h *harness) member(g *gang, i int, node string, idx []int32, downgraded bool) v1.Pod {
	p := *g.pods()[i]
	p.UID = types.UID(fmt.Sprintf("%s-%d-uid", g.name, i))
	p.Status.Phase = v1.PodPending
	if node == "" {
		return p
	}
	rec, _ := json.Marshal(map[string]any{
		"group": g.key(), "virtualCluster": g.vc, "priority": g.priority, "leafCellType": g.leaf,
		"members": g.spec().Members, "node": node, "leafCellIndices": idx, "downgraded": downgraded,
	})
	var s []string
	for _, x := range idx {
		s = append(s, fmt.Sprint(x))
	}
	p.Spec.NodeName = node
	p.Status.Phase = v1.PodRunning
	p.Annotations[hivesched.AnnotationPlacement] = string(rec)
	p.Annotations[hivesched.AnnotationLeafCellIndices] = strings.Join(s, ",")
	p.Annotations[hivesched.AnnotationPlacementSignature] = placement.Signature(h.key, &p)
	return p
}

func readyNodes() []v1.Node {
	var out []v1.Node
	for _, n := range []string{"gpu-a0", "gpu-a1", "gpu-a2", "gpu-a3", "gpu-b0", "gpu-b1", "gpu-b2", "gpu-b3", "t4-0", "t4-1"} {
		out = append(out, v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n},
			Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}}})
	}
	return out
}

func gangOf(vc, ns, leaf, name string, prio, n int, gpus int64) *gang {
	return &gang{shape: shape{vc: vc, ns: ns, leaf: leaf, n: n, gpus: gpus}, name: name, priority: prio}
}

func idx(from, n int32) []int32 {
	var out []int32
	for i := from; i < from+n; i++ {
		out = append(out, i)
	}
	return out
}

func TestCheckerStrict(t *testing.T) {
	h := testHarness(t)
	a := gangOf("vc-speech", "speech", "V100", "a", 0, 2, 4)
	b := gangOf("vc-speech", "speech", "V100", "b", 0, 1, 4)
	clean := &snapshot{at: time.Now(), nodes: readyNodes(), vcs: sampleVCs(), pods: []v1.Pod{
		h.member(a, 0, "gpu-b0", idx(0, 4), false), h.member(a, 1, "gpu-b0", idx(4, 4), false), h.member(b, 0, "gpu-b1", idx(0, 4), false),
	}}
	h.check(clean, "clean")
	if h.fig.Violations != 0 {
		t.Fatalf("a clean snapshot: %v", h.violations)
	}

	double := &snapshot{at: time.Now(), pods: append(append([]v1.Pod(nil), clean.pods[:2]...), h.member(b, 0, "gpu-b0", idx(2, 4), false))}
	if got := doubleBooked(double); len(got) != 4 || !strings.Contains(got[0], "gpu-b0/2 is used by speech/a-0 and speech/b-0") {
		t.Errorf("devices 2-5 of gpu-b0 are booked twice; found %v", got)
	}

	unplaced := h.member(b, 0, "gpu-b1", idx(0, 4), false)
	delete(unplaced.Annotations, hivesched.AnnotationPlacement)
	forged := h.member(b, 0, "gpu-b2", idx(0, 4), false)
	forged.Annotations[hivesched.AnnotationPlacement] = strings.Replace(forged.Annotations[hivesched.AnnotationPlacement], "gpu-b2", "gpu-b1", 1)
	_, bad := h.placements(&snapshot{pods: []v1.Pod{unplaced, forged}})
	if len(bad) != 2 || !strings.Contains(bad[0], "without "+hivesched.AnnotationPlacement) || !strings.Contains(bad[1], "not signed") {
		t.Errorf("a bound pod without a record and one with a changed record; found %v", bad)
	}
}

func TestCheckerWindowed(t *testing.T) {
	h := testHarness(t)
	g := gangOf("vc-speech", "speech", "V100", "g", 0, 2, 8)
	t0 := time.Now()
	half := func(at time.Time) *snapshot {
		return &snapshot{at: at, pods: []v1.Pod{h.member(g, 0, "gpu-b0", idx(0, 8), false), h.member(g, 1, "", nil, false)}}
	}
	h.check(half(t0), "t0")
	h.check(half(t0.Add(time.Second)), "t1")
	if h.fig.Violations != 0 {
		t.Fatalf("partly bound for 1 s, inside the 2 s window: %v", h.violations)
	}
	h.check(half(t0.Add(3*time.Second)), "t3")
	h.check(half(t0.Add(4*time.Second)), "t4")
	if h.fig.Violations != 1 || !strings.Contains(h.violations[0], "partly bound") || h.fig.MaxPartialGang != 4*time.Second {
		t.Fatalf("partly bound for 4 s: want one violation and 4 s; got %v, %v", h.violations, h.fig.MaxPartialGang)
	}

	// vc-speech has 4 T4: 8 guaranteed T4 is above its cells; downgraded
	// (opportunistic) ones do not count.
	h = testHarness(t)
	x, y := gangOf("vc-speech", "speech", "T4", "x", 0, 1, 4), gangOf("vc-speech", "speech", "T4", "y", 10, 1, 4)
	over := func(at time.Time, downgraded bool) *snapshot {
		return &snapshot{at: at, pods: []v1.Pod{h.member(x, 0, "t4-0", idx(0, 4), downgraded), h.member(y, 0, "t4-1", idx(0, 4), false)}}
	}
	h.check(over(t0, true), "t0")
	h.check(over(t0.Add(5*time.Second), true), "t5")
	if h.fig.Violations != 0 {
		t.Fatalf("4 guaranteed T4 and 4 downgraded: %v", h.violations)
	}
	h.check(over(t0.Add(6*time.Second), false), "t6")
	h.check(over(t0.Add(9*time.Second), false), "t9")
	if h.fig.Violations != 1 || !strings.Contains(h.violations[0], "use 8 T4 leaf cells, it has 4") {
		t.Fatalf("8 guaranteed T4 for 3 s: %v", h.violations)
	}
}

func TestCheckerSettledAndStatus(t *testing.T) {
	h := testHarness(t)
	pending := gangOf("vc-vision", "vision", "V100", "p", 0, 1, 8)
	s := &snapshot{at: time.Now(), nodes: readyNodes(), vcs: sampleVCs(), pods: []v1.Pod{h.member(pending, 0, "", nil, false)}}
	if got := h.unsettled(s, []*gang{pending}); len(got) != 1 || !strings.Contains(got[0], "says Placed") {
		t.Errorf("a 1x8 gang pending in an empty VC fits; found %v", got)
	}
	// vc-vision's five nodes run priority-100 gangs: a priority-0 1x8 waits.
	var live []*gang
	for i, n := range []string{"gpu-a0", "gpu-a1", "gpu-a2", "gpu-a3", "gpu-b3"} {
		g := gangOf("vc-vision", "vision", "V100", fmt.Sprintf("h%d", i), 100, 1, 8)
		live = append(live, g)
		s.pods = append(s.pods, h.member(g, 0, n, idx(0, 8), false))
	}
	if got := h.unsettled(s, append(live, pending)); len(got) != 0 {
		t.Errorf("vc-vision is full of higher priority: nothing fits; found %v", got)
	}
	// The pending gang at priority 1000 preempts one of them.
	urgent := gangOf("vc-vision", "vision", "V100", "u", 1000, 1, 8)
	s.pods = append(s.pods, h.member(urgent, 0, "", nil, false))
	if got := h.unsettled(s, append(live, urgent)); len(got) != 1 || !strings.Contains(got[0], "says Preempt") {
		t.Errorf("a priority-1000 gang can preempt: found %v", got)
	}

	s.vcs[0].Status = hv1.VirtualClusterStatus{TotalLeafCells: 40, UsedLeafCells: 40}
	s.vcs[1].Status = hv1.VirtualClusterStatus{TotalLeafCells: 28}
	if got := h.statusLag(s); len(got) != 0 {
		t.Errorf("the status is true: %v", got)
	}
	s.vcs[0].Status.UsedLeafCells = 32
	if got := h.statusLag(s); len(got) != 1 || !strings.Contains(got[0], "used 32") {
		t.Errorf("vc-vision's status says 32 used, its pods 40: found %v", got)
	}
}

// The gang's pods carry the labels and annotations the checks read.
func TestGangPods(t *testing.T) {
	g := &gang{shape: shape{vc: "vc-vision", ns: "vision", leaf: "V100", pinned: "pinned-b3", n: 2, gpus: 4}, name: "c1", priority: 10, lazy: true}
	want := util.GangPods("vision", "c1", "vc-vision", 10, 2, 4, "hivesched")
	got := g.pods()
	if len(got) != 2 || got[1].Name != want[1].Name || got[0].Labels[labelChaos] != "true" ||
		got[0].Annotations[hivesched.AnnotationPinnedCell] != "pinned-b3" || got[0].Annotations[hivesched.AnnotationLazyPreemption] != "true" ||
		got[0].Annotations[hivesched.AnnotationLeafCellType] != "V100" {
		t.Errorf("gang pods: %+v", got[0].ObjectMeta)
	}
}
