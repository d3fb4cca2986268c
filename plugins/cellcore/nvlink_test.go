package cellcore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 45: GB200 NVL72 NVLink domains as cells, beside 8-GPU H100 nodes.

const cliqueKey = "nvidia.com/gpu.clique"

// nvl72Config is a GB200-shaped cluster: domains NVL72 domains of 18 trays
// of 4 GPUs (a domain is two halves of 9 trays, the NVL36 a tenant may own:
// any 9 trays of one domain share its NVLink), named d<i>-t<j>, the domain's
// level keyed by the clique label; and h100 8-GPU H100 nodes (h100-<i>) in
// their own chain.
func nvl72Config(domains, h100 int) Config {
	cfg := Config{CellTypes: map[string]CellTypeSpec{
		"GB200-NODE":  {ChildCellType: "GB200", ChildCellNumber: 4, IsNodeLevel: true},
		"GB200-NVL36": {ChildCellType: "GB200-NODE", ChildCellNumber: 9},
		"GB200-NVL72": {ChildCellType: "GB200-NVL36", ChildCellNumber: 2, TopologyKey: cliqueKey},
		"H100-NODE":   {ChildCellType: "H100", ChildCellNumber: 8, IsNodeLevel: true, TopologyKey: hostKey},
	}}
	for d := 0; d < domains; d++ {
		dom := PhysicalCellSpec{CellType: "GB200-NVL72", CellAddress: fmt.Sprintf("clique-%d", d)}
		for h := 0; h < 2; h++ {
			half := PhysicalCellSpec{CellAddress: fmt.Sprintf("clique-%d-%d", d, h)}
			for t := 0; t < 9; t++ {
				half.CellChildren = append(half.CellChildren, PhysicalCellSpec{CellAddress: fmt.Sprintf("d%d-t%02d", d, h*9+t)})
			}
			dom.CellChildren = append(dom.CellChildren, half)
		}
		cfg.PhysicalCells = append(cfg.PhysicalCells, dom)
	}
	for i := 0; i < h100; i++ {
		cfg.PhysicalCells = append(cfg.PhysicalCells, PhysicalCellSpec{CellType: "H100-NODE", CellAddress: fmt.Sprintf("h100-%d", i)})
	}
	return cfg
}

// domainOf is the domain of a GB200 tray name (d<i>-t<j>).
func domainOf(node string) string { return strings.SplitN(node, "-", 2)[0] }

func gb200(s AffinityGroupSpec) AffinityGroupSpec {
	s.LeafCellType = "GB200"
	return s
}

func podDomains(d Decision) map[string]int {
	out := map[string]int{}
	for _, p := range d.Pods {
		out[domainOf(p.Node)]++
	}
	return out
}

// nvl72Core: two domains and two H100 nodes; vc-frontier owns a whole
// domain, vc-labs half of one and an H100 node.
func nvl72Core(t *testing.T) *Core {
	t.Helper()
	k := newHealthyCore(t, nvl72Config(2, 2))
	_, err := k.SetVirtualCluster(vcSpec("vc-frontier", "GB200-NVL72", 1))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("vc-labs", "GB200-NVL72.GB200-NVL36", 1, "H100-NODE", 1))
	require.NoError(t, err)
	mustCheck(t, k)
	return k
}

// A tenant that owns a domain gets it whole for a 72-GPU job however
// another tenant's 1-GPU jobs fragmented the cluster: they are
// opportunistic there, and only they are preempted; the other tenant's
// guaranteed 1-GPU jobs inside its own half domain stay.
func TestNVL72TenantGetsItsDomainWhole(t *testing.T) {
	k := nvl72Core(t)
	// vc-labs: 36 guaranteed 1-GPU jobs fill its half domain.
	for i := 0; i < 36; i++ {
		vcPlace(t, k, gb200(within(ag(fmt.Sprintf("labs-%d", i), "vc-labs", 10, 1, 1), cliqueKey)))
	}
	// Then 108 opportunistic 1-GPU jobs fill every other GB200 GPU.
	for i := 0; i < 108; i++ {
		vcPlace(t, k, gb200(ag(fmt.Sprintf("opp-%d", i), "vc-labs", -1, 1, 1)))
	}
	d, err := k.Schedule(gb200(ag("one-more", "vc-labs", -1, 1, 1)))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind, "every GB200 GPU is taken")
	mustCheck(t, k)

	big := within(ag("frontier-72", "vc-frontier", 50, 18, 4), cliqueKey)
	d, err = k.Schedule(big)
	require.NoError(t, err)
	require.Equal(t, Preempt, d.Kind, d.Reason)
	require.Len(t, d.Victims, 72, "one domain's opportunistic jobs, exactly")
	for _, v := range d.Victims {
		require.True(t, strings.HasPrefix(v, "opp-"), "victim %s: only opportunistic jobs are preempted", v)
	}
	for _, v := range d.Victims {
		deleteAllPods(t, k, v)
	}
	mustCheck(t, k)
	d = vcPlace(t, k, big)
	require.Len(t, podDomains(d), 1, "the 72-GPU gang is in one domain: %v", podDomains(d))
	mustCheck(t, k)
	for i := 0; i < 36; i++ {
		st, ok := k.AffinityGroupStatus(fmt.Sprintf("labs-%d", i))
		require.True(t, ok)
		require.Equal(t, AGAllocated, st.State, "vc-labs' guaranteed jobs keep running")
	}
}

// A gang larger than a domain that asks for one domain is refused, saying
// why; one that may span domains takes the fewest (two whole domains for
// 144 GPUs); a 2 x 4 gang fits in a fragmented domain.
func TestNVL72GangShapes(t *testing.T) {
	k := newHealthyCore(t, nvl72Config(3, 0))
	_, err := k.SetVirtualCluster(vcSpec("vc-all", "GB200-NVL72", 3))
	require.NoError(t, err)

	_, err = k.Schedule(within(ag("too-big", "vc-all", 0, 19, 4), cliqueKey))
	require.Error(t, err)
	require.Contains(t, err.Error(), "76 leaf cells")
	mustCheck(t, k)

	d := vcPlace(t, k, ag("span", "vc-all", 0, 36, 4))
	require.Len(t, podDomains(d), 2, "144 GPUs in two whole domains: %v", podDomains(d))
	for dom, pods := range podDomains(d) {
		require.Equal(t, 18, pods, "domain %s whole", dom)
	}
	mustCheck(t, k)

	// The third domain full of 1-GPU jobs, then one GPU freed on each of
	// eight trays: 8 GPUs free by count, no 2 x 4 in them; the pair waits.
	// With two whole trays freed it is placed on them, in the domain.
	byNode := map[string][]string{}
	for i := 0; i < 72; i++ {
		d := vcPlace(t, k, ag(fmt.Sprintf("small-%d", i), "vc-all", 0, 1, 1))
		byNode[d.Pods[0].Node] = append(byNode[d.Pods[0].Node], d.Group)
	}
	require.Len(t, byNode, 18)
	third := ""
	for n := range byNode {
		third = domainOf(n)
	}
	for tr := 2; tr < 10; tr++ {
		deleteAllPods(t, k, byNode[fmt.Sprintf("%s-t%02d", third, tr)][0])
	}
	mustCheck(t, k)
	d, err = k.Schedule(within(ag("pair", "vc-all", 0, 2, 4), cliqueKey))
	require.NoError(t, err)
	require.NotEqual(t, Placed, d.Kind, "8 GPUs free, on 8 trays")
	for _, tr := range []string{third + "-t00", third + "-t01"} {
		for _, g := range byNode[tr] {
			deleteAllPods(t, k, g)
		}
	}
	d = vcPlace(t, k, within(ag("pair", "vc-all", 0, 2, 4), cliqueKey))
	require.Equal(t, map[string]int{third: 2}, podDomains(d))
	mustCheck(t, k)
}

// A domain short of a tray (out for repair): the VC that owns it keeps
// owning a domain and sees the loss (a doomed cell: lost leaf cells and the
// tray named); a gang of the trays that are left runs in it; a gang of the
// whole domain waits, saying why, and runs once the tray is back.
func TestNVL72ShortDomain(t *testing.T) {
	k := newHealthyCore(t, nvl72Config(2, 0))
	_, err := k.SetVirtualCluster(vcSpec("vc-a", "GB200-NVL72", 1))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("vc-b", "GB200-NVL72", 1))
	require.NoError(t, err)
	require.NoError(t, k.SetNodeHealth("d1-t17", NodeBad))
	mustCheck(t, k)
	lost := int32(0)
	for _, vc := range []string{"vc-a", "vc-b"} {
		st, _ := k.VirtualClusterStatus(vc)
		lost += st.LostLeafCells
		if st.LostLeafCells > 0 {
			require.Equal(t, []string{"d1-t17"}, st.LostNodes)
		}
	}
	require.Equal(t, int32(4), lost, "one VC is short of one tray, and says so")

	// Which VC the short domain is bound to is the free pool's choice;
	// that VC places a gang of the 17 trays left, and its 72-GPU gang
	// waits, saying why; the other places its 72-GPU gang in its whole
	// domain. With the tray back, the first gets its whole domain.
	short, whole := "vc-a", "vc-b"
	if st, _ := k.VirtualClusterStatus("vc-b"); st.LostLeafCells > 0 {
		short, whole = whole, short
	}
	w := vcPlace(t, k, within(ag("whole-72", whole, 0, 18, 4), cliqueKey))
	require.Equal(t, map[string]int{"d0": 18}, podDomains(w))
	s17 := vcPlace(t, k, within(ag("short-68", short, 0, 17, 4), cliqueKey))
	require.Equal(t, map[string]int{"d1": 17}, podDomains(s17))
	deleteAllPods(t, k, "short-68")
	d, err := k.Schedule(within(ag("short-72", short, 0, 18, 4), cliqueKey))
	require.NoError(t, err)
	require.Equal(t, Wait, d.Kind)
	require.Contains(t, d.Reason, "unhealthy hardware")
	mustCheck(t, k)
	require.NoError(t, k.SetNodeHealth("d1-t17", NodeHealthy))
	d = vcPlace(t, k, within(ag("short-72", short, 0, 18, 4), cliqueKey))
	require.Equal(t, map[string]int{"d1": 18}, podDomains(d))
	mustCheck(t, k)
}

// The 4-GPU and 8-GPU chains side by side: a VC's H100 node and GB200 half
// domain are bound in their own chains; an H100 gang never lands on GB200
// trays, nor the reverse.
func TestNVL72BesideH100(t *testing.T) {
	k := nvl72Core(t)
	h := vcPlace(t, k, AffinityGroupSpec{Name: "h", VirtualCluster: "vc-labs", LeafCellType: "H100", Members: []AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 8}}})
	require.True(t, strings.HasPrefix(h.Pods[0].Node, "h100-"), h.Pods[0].Node)
	g := vcPlace(t, k, within(AffinityGroupSpec{Name: "g", VirtualCluster: "vc-labs", LeafCellType: "GB200", Members: []AffinityGroupMember{{PodNumber: 9, LeafCellNumber: 4}}}, cliqueKey))
	require.Len(t, podDomains(g), 1)
	require.True(t, strings.HasPrefix(g.Pods[0].Node, "d"), g.Pods[0].Node)
	// vc-labs has no second H100 node, and an 8-GPU pod does not fit a
	// 4-GPU tray.
	d, err := k.Schedule(AffinityGroupSpec{Name: "h2", VirtualCluster: "vc-labs", Members: []AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 8}}})
	if err == nil {
		require.NotEqual(t, Placed, d.Kind)
	}
	mustCheck(t, k)
}

// A derived domain padded with an absent tray (slicetopology's
// nodeGroupSizes) whose real tray then appears: the physical change swaps
// the absent node for the real one in the same cell shape, and applies
// with the short domain doomed to a VC and the other VC's gang running.
func TestNVL72AbsentTrayReplaced(t *testing.T) {
	cfg := nvl72Config(2, 0)
	cfg.PhysicalCells[1].CellChildren[1].CellChildren[8].CellAddress = "absent-17.clique.clique-1"
	k := newHealthyCore(t, cfg)
	require.NoError(t, k.SetNodeHealth("absent-17.clique.clique-1", NodeBad))
	_, err := k.SetVirtualCluster(vcSpec("vc-a", "GB200-NVL72", 1))
	require.NoError(t, err)
	_, err = k.SetVirtualCluster(vcSpec("vc-b", "GB200-NVL72", 1))
	require.NoError(t, err)
	whole := "vc-a"
	if st, _ := k.VirtualClusterStatus("vc-a"); st.LostLeafCells > 0 {
		whole = "vc-b"
	}
	d := vcPlace(t, k, within(ag("whole", whole, 0, 18, 4), cliqueKey))
	require.Equal(t, map[string]int{"d0": 18}, podDomains(d))
	mustCheck(t, k)

	res, err := k.ReplacePhysicalCluster(nvl72Config(2, 0))
	require.NoError(t, err)
	require.True(t, res.Applied, "%+v", res)
	require.Equal(t, []string{"d1-t17"}, res.AddedNodes)
	require.Equal(t, []string{"absent-17.clique.clique-1"}, res.RemovedNodes)
	mustCheck(t, k)
	require.NoError(t, k.SetNodeHealth("d1-t17", NodeHealthy))
	mustCheck(t, k)
	other := map[string]string{"vc-a": "vc-b", "vc-b": "vc-a"}[whole]
	d = vcPlace(t, k, within(ag("now-whole", other, 0, 18, 4), cliqueKey))
	require.Equal(t, map[string]int{"d1": 18}, podDomains(d))
	mustCheck(t, k)
}
