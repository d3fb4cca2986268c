package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

// TestScheduler runs the scenarios one after another on one API server; each
// starts its own scheduler on its own nodes, namespace and VCs.
func TestScheduler(t *testing.T) {
	c := startCluster(t)

	t.Run("gang lands all-or-nothing within one cell", func(t *testing.T) {
		c.createNodes(t, "gang", 2, 4, 0)
		c.createNamespace(t, "gang")
		c.createVC(t, "gang-vc", []string{"gang"}, "V100-RACK", 1, "V100-NODE", 2)
		c.startScheduler(t, physicalCluster("gang", 2, 4, 0))

		pods := gangPods("gang", "job1", "gang-vc", 0, 4, 8)
		c.createPods(t, pods)
		nodes := c.waitBound(t, pods, 30*time.Second)
		racks := map[string]bool{}
		for _, n := range nodes {
			racks[n[:len("gang-r0")]] = true
		}
		require.Len(t, racks, 1, "a 4x8 gang fits one rack: %v", nodes)
		got := c.getPod(t, pods[0])
		require.Contains(t, got.Annotations, hivesched.AnnotationPlacement)
		require.Equal(t, "0,1,2,3,4,5,6,7", got.Annotations[hivesched.AnnotationLeafCellIndices])

		// A gang larger than the VC's free cells binds nothing at all.
		big := gangPods("gang", "job2", "gang-vc", 0, 3, 8)
		c.createPods(t, big)
		c.requireUnbound(t, big, 3*time.Second)
	})

	t.Run("a gang whose members do not all pass Permit binds nothing", func(t *testing.T) {
		// The cell model says both nodes have 8 GPUs, but one node's
		// allocatable has none: the member placed there never passes
		// NodeResourcesFit, the other waits at Permit, times out, and the
		// whole group is rolled back (x1). No member is ever bound.
		c.createNode(t, "permit-r0-n0", "nvidia.com/gpu", 8, true)
		c.createNode(t, "permit-r0-n1", "nvidia.com/gpu", 0, true)
		c.createNamespace(t, "permit")
		c.createVC(t, "permit-vc", []string{"permit"}, "V100-NODE", 2)
		c.startScheduler(t, physicalCluster("permit", 1, 2, 0))
		gang := gangPods("permit", "g", "permit-vc", 0, 2, 8)
		c.createPods(t, gang)
		c.requireUnbound(t, gang, 12*time.Second) // more than two Permit timeouts
		// The member that reached Permit was rejected there, whole gang.
		require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			for _, p := range gang {
				for _, cond := range c.getPod(t, p).Status.Conditions {
					if cond.Type == v1.PodScheduled && strings.Contains(cond.Message, "timeout after waiting 5s at plugin HiveSched") {
						return true, nil
					}
				}
			}
			return false, nil
		}), c.describe(t, gang))
	})

	t.Run("a gang that does not fit waits and lands when capacity frees", func(t *testing.T) {
		c.createNodes(t, "wait", 1, 2, 0)
		c.createNamespace(t, "wait")
		c.createVC(t, "wait-vc", []string{"wait"}, "V100-NODE", 1)
		c.startScheduler(t, physicalCluster("wait", 1, 2, 0))

		a := gangPods("wait", "a", "wait-vc", 0, 2, 4)
		c.createPods(t, a)
		c.waitBound(t, a, 30*time.Second)
		b := gangPods("wait", "b", "wait-vc", 0, 1, 8)
		c.createPods(t, b)
		c.requireUnbound(t, b, 3*time.Second)
		// One sentence: what the group needs, who holds the cells, what
		// frees them; nothing appended by other plugins' PostFilter.
		ev := c.failedScheduling(t, b[0], `affinity group "wait/b"`, 20*time.Second)
		t.Logf("waiting pod's event: %s", ev)
		require.Regexp(t, oneSentence, ev)
		require.Contains(t, ev, `: affinity group "wait/b" (priority 0) needs 1 pod of 8 V100 in virtual cluster "wait-vc": `+
			`of its 8 V100 (1 V100-NODE), 8 are used by groups of priority 0 or higher (wait/a) and none is free; it binds when enough of those groups finish.`)
		c.deletePods(t, a)
		c.waitBound(t, b, 30*time.Second)
	})

	t.Run("whole-gang preemption inside a VC", func(t *testing.T) {
		c.createNodes(t, "pre", 1, 2, 0)
		c.createNamespace(t, "pre")
		c.createVC(t, "pre-vc", []string{"pre"}, "V100-NODE", 2)
		c.startScheduler(t, physicalCluster("pre", 1, 2, 0))

		low := gangPods("pre", "low", "pre-vc", 0, 2, 8)
		c.createPods(t, low)
		c.waitBound(t, low, 30*time.Second)
		for i := range low {
			low[i] = c.getPod(t, low[i])
		}
		high := gangPods("pre", "high", "pre-vc", 10, 1, 8)
		c.createPods(t, high)
		// The high group needs one node, but the low gang dies whole.
		c.waitGone(t, low, 30*time.Second)
		c.waitBound(t, high, 30*time.Second)
		c.waitEvent(t, low[0], "preempted by affinity group pre/high", 10*time.Second)
	})

	t.Run("opportunistic pods scavenge idle cells and are preempted by guaranteed ones", func(t *testing.T) {
		c.createNodes(t, "opp", 1, 2, 0)
		c.createNamespace(t, "opp")
		c.createVC(t, "opp-vc", []string{"opp"}, "V100-NODE", 1)
		c.startScheduler(t, physicalCluster("opp", 1, 2, 0))

		opp := gangPods("opp", "scavenger", "opp-vc", -1, 2, 8)
		c.createPods(t, opp)
		c.waitBound(t, opp, 30*time.Second) // both nodes: more than the VC owns
		for i := range opp {
			opp[i] = c.getPod(t, opp[i])
		}
		g := gangPods("opp", "guaranteed", "opp-vc", 0, 1, 8)
		c.createPods(t, g)
		c.waitGone(t, opp, 30*time.Second)
		c.waitBound(t, g, 30*time.Second)
	})

	t.Run("VC isolation: a full VC never takes another VC's cells", func(t *testing.T) {
		c.createNodes(t, "iso", 1, 2, 0)
		c.createNamespace(t, "iso")
		c.createVC(t, "iso-vc1", []string{"iso"}, "V100-NODE", 1)
		c.createVC(t, "iso-vc2", []string{"iso"}, "V100-NODE", 1)
		c.startScheduler(t, physicalCluster("iso", 1, 2, 0))

		a := gangPods("iso", "a", "iso-vc1", 0, 1, 8)
		c.createPods(t, a)
		c.waitBound(t, a, 30*time.Second)
		b := gangPods("iso", "b", "iso-vc1", 0, 1, 8)
		c.createPods(t, b)
		c.requireUnbound(t, b, 3*time.Second) // iso-vc2's node stays idle for it
		o := gangPods("iso", "o", "iso-vc2", 0, 1, 8)
		c.createPods(t, o)
		c.waitBound(t, o, 30*time.Second)
	})

	t.Run("cordoned and NotReady nodes are avoided", func(t *testing.T) {
		c.createNodes(t, "health", 1, 3, 0)
		c.createNamespace(t, "health")
		c.createVC(t, "health-vc", []string{"health"}, "V100-NODE", 1)
		n0, err := c.kube.CoreV1().Nodes().Get(t.Context(), "health-r0-n0", metav1.GetOptions{})
		require.NoError(t, err)
		n0.Spec.Unschedulable = true
		_, err = c.kube.CoreV1().Nodes().Update(t.Context(), n0, metav1.UpdateOptions{})
		require.NoError(t, err)
		n1, err := c.kube.CoreV1().Nodes().Get(t.Context(), "health-r0-n1", metav1.GetOptions{})
		require.NoError(t, err)
		n1.Status.Conditions[0].Status = v1.ConditionFalse
		_, err = c.kube.CoreV1().Nodes().UpdateStatus(t.Context(), n1, metav1.UpdateOptions{})
		require.NoError(t, err)
		c.startScheduler(t, physicalCluster("health", 1, 3, 0))

		for i := 0; i < 3; i++ {
			p := gangPods("health", fmt.Sprintf("j%d", i), "health-vc", -1, 1, 2)
			c.createPods(t, p)
			nodes := c.waitBound(t, p, 30*time.Second)
			require.Equal(t, "health-r0-n2", nodes[0])
		}
	})

	t.Run("a restarted scheduler recovers every allocation and double-books nothing", func(t *testing.T) {
		c.createNodes(t, "rst", 1, 2, 0)
		c.createNamespace(t, "rst")
		c.createVC(t, "rst-vc", []string{"rst"}, "V100-NODE", 2)
		// The first scheduler binds with DefaultBinder (placement patched in
		// PreBind), the restarted one with HiveSched's Bind: recovery reads
		// what either wrote.
		s := c.startScheduler(t, physicalCluster("rst", 1, 2, 0), withDefaultBinderFirst)

		a := gangPods("rst", "a", "rst-vc", 0, 2, 4)
		c.createPods(t, a)
		aNodes := c.waitBound(t, a, 30*time.Second)
		require.Equal(t, aNodes[0], aNodes[1], "a 2x4 gang packs into one node")
		for _, p := range a {
			got := c.getPod(t, p)
			require.Contains(t, got.Annotations, hivesched.AnnotationPlacement, "PreBind wrote the placement")
		}
		s.stop()

		c.startScheduler(t, physicalCluster("rst", 1, 2, 0))
		b := gangPods("rst", "b", "rst-vc", 0, 1, 8)
		c.createPods(t, b)
		bNodes := c.waitBound(t, b, 30*time.Second)
		require.NotEqual(t, aNodes[0], bNodes[0], "the recovered gang's node is not booked twice")
		extra := gangPods("rst", "c", "rst-vc", 0, 1, 1)
		c.createPods(t, extra)
		c.requireUnbound(t, extra, 3*time.Second)
		c.waitVCStatus(t, "rst-vc", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 16 })
	})

	t.Run("a restart while a gang is binding: the pending member still lands", func(t *testing.T) {
		c.createNodes(t, "late", 1, 2, 0)
		c.createNamespace(t, "late")
		c.createVC(t, "late-vc", []string{"late"}, "V100-NODE", 2)
		gang := gangPods("late", "g", "late-vc", 0, 2, 8)
		// Member 0 was bound by the scheduler that crashed: it carries the
		// persisted placement. Member 1 was still pending.
		gang[0].Spec.NodeName = "late-r0-n0"
		gang[0].Annotations[hivesched.AnnotationPlacement] = `{"group":"late/g","virtualCluster":"late-vc","priority":0,` +
			`"members":[{"podNumber":2,"leafCellNumber":8}],"node":"late-r0-n0","leafCellIndices":[0,1,2,3,4,5,6,7]}`
		c.createBoundPods(t, gang[:1])
		c.createPods(t, gang[1:])
		c.startScheduler(t, physicalCluster("late", 1, 2, 0))
		nodes := c.waitBound(t, gang, 30*time.Second)
		require.Equal(t, []string{"late-r0-n0", "late-r0-n1"}, nodes)
		c.waitVCStatus(t, "late-vc", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 16 })
	})

	t.Run("a bad spec yields a clear event and touches nothing", func(t *testing.T) {
		c.createNodes(t, "bad", 1, 1, 0)
		c.createNamespace(t, "bad")
		c.createVC(t, "bad-vc", []string{"bad"}, "V100-NODE", 1)
		c.startScheduler(t, physicalCluster("bad", 1, 1, 0))

		cases := map[string]func(p *v1.Pod){
			"not valid YAML":                        func(p *v1.Pod) { p.Annotations[hivesched.HivedSpecAnnotation] = "virtualCluster: [" },
			`virtual cluster "nope" does not exist`: func(p *v1.Pod) { p.Labels[hivesched.LabelVirtualCluster] = "nope" },
			"is out of range":                       func(p *v1.Pod) { p.Annotations[hivesched.AnnotationPriority] = "5000" },
			"unknown leaf cell type":                func(p *v1.Pod) { p.Annotations[hivesched.AnnotationLeafCellType] = "H100" },
			"no node of a usable chain has more than 8": func(p *v1.Pod) {
				p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("16")
				p.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"] = resource.MustParse("16")
			},
			"has no member of that size": func(p *v1.Pod) { p.Annotations[hivesched.AnnotationGroupMembers] = "2x4" },
		}
		i := 0
		for want, mutate := range cases {
			i++
			p := gangPods("bad", fmt.Sprintf("b%d", i), "bad-vc", 0, 1, 8)[0]
			mutate(p)
			c.createPods(t, []*v1.Pod{p})
			ev := c.waitEvent(t, p, want, 20*time.Second)
			t.Logf("%s -> %s", p.Name, ev)
		}
		good := gangPods("bad", "good", "bad-vc", 0, 1, 8)
		c.createPods(t, good)
		c.waitBound(t, good, 30*time.Second)
	})

	t.Run("a VC that does not fit is Rejected, the others keep working", func(t *testing.T) {
		c.createNodes(t, "rej", 1, 2, 0)
		c.createNamespace(t, "rej")
		c.createVC(t, "rej-ok", []string{"rej"}, "V100-NODE", 1)
		c.createVC(t, "rej-big", []string{"rej"}, "V100-NODE", 5)
		c.startScheduler(t, physicalCluster("rej", 1, 2, 0))
		st := c.waitVCStatus(t, "rej-big", func(st hv1.VirtualClusterStatus) bool { return st.State == hv1.VirtualClusterRejected })
		msg := ""
		for _, cond := range st.Conditions {
			if cond.Type == hv1.ConditionRejected && cond.Status == metav1.ConditionTrue {
				msg = cond.Message
			}
		}
		require.Contains(t, msg, "does not fit")
		t.Logf("Rejected: %s", msg)
		// The owner of the VC is told where kubectl describe looks too.
		ev := c.objectEvent(t, "VirtualCluster", "rej-big", "does not fit")
		require.True(t, strings.HasPrefix(ev, "Rejected: "), "event %q", ev)
		ok := gangPods("rej", "ok", "rej-ok", 0, 1, 8)
		c.createPods(t, ok)
		c.waitBound(t, ok, 30*time.Second)
		refused := gangPods("rej", "refused", "rej-big", 0, 1, 8)
		c.createPods(t, refused)
		c.waitEvent(t, refused[0], "is Rejected", 20*time.Second)
	})

	t.Run("kubectl get vc shows usage", func(t *testing.T) {
		c.createNodes(t, "cols", 1, 3, 0)
		c.createNamespace(t, "cols")
		c.createPinnedVC(t, "cols-vc", []string{"cols"}, []string{"cols-pin"}, "V100-NODE", 2)
		c.startScheduler(t, withPinned(physicalCluster("cols", 1, 3, 0), 0, 2, "cols-pin"))
		p := gangPods("cols", "j", "cols-vc", 0, 3, 2)
		c.createPods(t, p)
		c.waitBound(t, p, 30*time.Second)
		// An opportunistic job of the VC runs on the node the VC has not
		// bound yet: outside its guarantee, so counted apart.
		opp := gangPods("cols", "o", "cols-vc", -1, 1, 4)
		c.createPods(t, opp)
		c.waitBound(t, opp, 30*time.Second)
		st := c.waitVCStatus(t, "cols-vc", func(st hv1.VirtualClusterStatus) bool {
			return st.UsedLeafCells == 6 && st.OpportunisticLeafCells == 4
		})
		require.EqualValues(t, 24, st.TotalLeafCells, "2 nodes and the pinned node")
		require.EqualValues(t, 18, st.FreeLeafCells, "2 in the bound node, 8 of the unbound one, 8 pinned")
		require.EqualValues(t, 1, st.OpportunisticGroups)
		require.EqualValues(t, 0, st.DowngradedGroups)

		// The server-side table is what kubectl prints.
		raw, err := c.kube.CoreV1().RESTClient().Get().AbsPath("/apis/hivesched.io/v1alpha1/virtualclusters/cols-vc").
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(t.Context())
		require.NoError(t, err)
		var table metav1.Table
		require.NoError(t, json.Unmarshal(raw, &table))
		var cols []string
		for _, col := range table.ColumnDefinitions {
			cols = append(cols, col.Name)
		}
		require.Equal(t, []string{"Name", "Cells", "Total", "Used", "Free", "Lent", "Unavailable", "Opp", "Pending", "State", "Age"}, cols)
		require.Len(t, table.Rows, 1)
		row := table.Rows[0].Cells
		require.Equal(t, "2xV100-NODE,pinned:cols-pin", row[1])
		// Total = Used + Free + Lent + Unavailable; its own opportunistic
		// use is outside its total.
		for i, want := range []int{24, 6, 18, 0, 0, 4, 0} { // total, used, free, lent, unavailable, opportunistic, pending
			require.EqualValues(t, want, row[2+i], "column %s", cols[2+i])
		}
		require.Equal(t, "Active", row[9])
		if kubectl, err := exec.LookPath("kubectl"); err == nil {
			out, err := exec.Command(kubectl, "--kubeconfig", c.kubeconfig, "get", "vc", "cols-vc").CombinedOutput()
			require.NoError(t, err, string(out))
			t.Logf("kubectl get vc:\n%s", out)
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				require.LessOrEqual(t, len(line), 100, "the table stays narrow: %q", line)
			}
			// The virtual cells, which can be long, with -o wide.
			out, err = exec.Command(kubectl, "--kubeconfig", c.kubeconfig, "get", "vc", "cols-vc", "-o", "wide").CombinedOutput()
			require.NoError(t, err, string(out))
			require.Contains(t, string(out), "2xV100-NODE,pinned:cols-pin")
		}
	})

	t.Run("the VC status follows a change promptly, and at most once per interval", func(t *testing.T) {
		// The shipped interval: 5 s. A change after a quiet spell is written
		// within a fraction of a second (it used to wait for the next tick);
		// one that follows a write within the interval waits for its end.
		c.createNodes(t, "stw", 1, 2, 0)
		c.createNamespace(t, "stw")
		c.createVC(t, "stw-vc", []string{"stw"}, "V100-NODE", 2)
		c.startScheduler(t, physicalCluster("stw", 1, 2, 0), withStatusInterval(5))
		c.waitVCStatus(t, "stw-vc", func(st hv1.VirtualClusterStatus) bool { return st.State == hv1.VirtualClusterActive })
		time.Sleep(5 * time.Second) // a quiet spell: the status written at start is older than the interval

		a := gangPods("stw", "a", "stw-vc", 0, 1, 8)
		c.createPods(t, a)
		c.waitBound(t, a, 30*time.Second)
		start := time.Now()
		c.waitVCStatus(t, "stw-vc", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 8 })
		written := time.Now()
		require.Less(t, written.Sub(start), 2*time.Second, "the first status after a change is prompt")

		b := gangPods("stw", "b", "stw-vc", 0, 1, 8)
		c.createPods(t, b)
		c.waitBound(t, b, 30*time.Second)
		for time.Since(written) < 3*time.Second {
			vc, err := c.vc.HiveschedV1alpha1().VirtualClusters().Get(t.Context(), "stw-vc", metav1.GetOptions{})
			require.NoError(t, err)
			require.EqualValues(t, 8, vc.Status.UsedLeafCells, "a second change within the interval is held back")
			time.Sleep(200 * time.Millisecond)
		}
		c.waitVCStatus(t, "stw-vc", func(st hv1.VirtualClusterStatus) bool { return st.UsedLeafCells == 16 })
		require.Less(t, time.Since(written), 7*time.Second, "and written when the interval ends")
	})

	t.Run("a HiveD annotated pod schedules with HiveD's semantics", func(t *testing.T) {
		c.createNodes(t, "hived", 1, 2, 0)
		c.createNamespace(t, "hived")
		c.createVC(t, "hived-vc", []string{"hived"}, "V100-NODE", 2)
		c.startScheduler(t, physicalCluster("hived", 1, 2, 0))
		var pods []*v1.Pod
		for i := 0; i < 2; i++ {
			p := gangPods("hived", fmt.Sprintf("h%d", i), "hived-vc", 0, 1, 4)[0]
			p.Labels, p.Annotations = nil, map[string]string{hivesched.HivedSpecAnnotation: strings.Join([]string{
				"virtualCluster: hived-vc", "priority: 1", "leafCellType: V100", "leafCellNumber: 4",
				"affinityGroup:", "  name: train", "  members:", "  - podNumber: 2", "    leafCellNumber: 4"}, "\n")}
			pods = append(pods, p)
		}
		c.createPods(t, pods)
		nodes := c.waitBound(t, pods, 30*time.Second)
		require.Equal(t, nodes[0], nodes[1], "2x4 packs into one node")
		seen := map[string]bool{}
		for _, p := range pods {
			iso := c.getPod(t, p).Annotations[hivesched.HivedIsolationAnnotation]
			require.NotEmpty(t, iso)
			require.False(t, seen[iso])
			seen[iso] = true
		}
	})

	t.Run("a pod from a disallowed namespace is refused", func(t *testing.T) {
		c.createNodes(t, "acl", 1, 1, 0)
		c.createNamespace(t, "acl-a")
		c.createNamespace(t, "acl-b")
		c.createVC(t, "acl-vc", []string{"acl-a"}, "V100-NODE", 1)
		c.startScheduler(t, physicalCluster("acl", 1, 1, 0))
		intruder := gangPods("acl-b", "x", "acl-vc", 0, 1, 8)
		c.createPods(t, intruder)
		c.waitEvent(t, intruder[0], `namespace "acl-b" may not use virtual cluster "acl-vc"`, 20*time.Second)
		c.requireUnbound(t, intruder, 2*time.Second)
		owner := gangPods("acl-a", "y", "acl-vc", 0, 1, 8)
		c.createPods(t, owner)
		c.waitBound(t, owner, 30*time.Second) // the intruder consumed nothing
	})
}

func (c *cluster) waitVCStatus(t *testing.T, name string, ok func(hv1.VirtualClusterStatus) bool) hv1.VirtualClusterStatus {
	var last hv1.VirtualClusterStatus
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		vc, err := c.vc.HiveschedV1alpha1().VirtualClusters().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = vc.Status
		return ok(vc.Status), nil
	})
	require.NoError(t, err, "VC %s status: %+v", name, last)
	return last
}
