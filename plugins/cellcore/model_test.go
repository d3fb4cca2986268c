package cellcore

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	modelOps    = flag.Int("model.ops", 100000, "operations of the randomized model test (make soak runs 1e6)")
	modelSeed   = flag.Int64("model.seed", 1, "first seed of the randomized model test")
	modelDigest = flag.Bool("model.digest", false, "log a digest of the state after every step of each run: two commits whose runs log the same digests made the same decisions")
)

// Hooks through which a feature's own test file extends the model test
// (model_within_test.go: topology keys and constrained groups). make
// core-decisions-compare runs this file against an older core, whose
// package lacks that file: nil hooks draw no random number, so both sides
// replay the same operations.
var (
	modelConfigHook func(cfg *Config)
	modelSpecHook   func(m *modelRun, s *AffinityGroupSpec)
	// modelOutcomeHook sees every decision, and every refusal of a new
	// group (err).
	modelOutcomeHook func(m *modelRun, s AffinityGroupSpec, d Decision, err error)
	// modelReportHook adds to the test's closing report.
	modelReportHook func(t *testing.T)
	// modelElasticHook may turn a new spec into an extra pod of a gang
	// (model_elastic_test.go), after modelSpecHook.
	modelElasticHook func(m *modelRun, s *AffinityGroupSpec)
	// modelLivenessExempt: a waiting group the VC guarantee's oracle does
	// not judge (an extra pod: its promise is its own, elastic.go).
	modelLivenessExempt func(s AffinityGroupSpec) bool
)

// modelRun drives a core with random operations and checks every invariant
// after every step. Operations that fail must leave the state untouched.
type modelRun struct {
	t      *testing.T
	r      *rand.Rand
	cfg    Config
	k      *Core
	vcs    map[string]VirtualClusterSpec
	groups map[string]AffinityGroupSpec // groups the "plugin" knows
	health map[string]NodeHealth
	// devices: what each node reports of its devices (named devices' health,
	// unnamed unhealthy ones, those foreign pods hold), replayed at restart.
	devices map[string]NodeDevices
	next    int
	stats   map[string]int
	// mild: hardware breaks rarely and is never Unknown again after start
	// (about one node in ten and one device in twenty unhealthy at a time);
	// otherwise half the health changes break something (about half the
	// nodes and devices unhealthy at a time).
	mild bool
}

func newModelRun(t *testing.T, seed int64) *modelRun {
	m := &modelRun{t: t, r: rand.New(rand.NewSource(seed)), cfg: clusterConfig(3, 4, 3),
		vcs: map[string]VirtualClusterSpec{}, groups: map[string]AffinityGroupSpec{},
		health: map[string]NodeHealth{}, devices: map[string]NodeDevices{}, stats: map[string]int{}}
	// One pinned node.
	m.cfg.PhysicalCells[2].CellChildren[3].PinnedCellID = "pin-1"
	if modelConfigHook != nil {
		modelConfigHook(&m.cfg)
	}
	m.k = newHealthyCore(t, m.cfg)
	for n := range m.k.nodes {
		m.health[n] = NodeHealthy
	}
	for _, s := range []VirtualClusterSpec{
		vcSpec("vc1", "V100-RACK", 1, "V100-NODE", 1),
		vcSpec("vc2", "V100-NODE", 3, "V100-SOCKET", 2, "T4-NODE", 1),
		{Name: "vc3", VirtualCells: []VirtualCellSpec{{CellType: "T4-NODE", CellNumber: 1}}, PinnedCells: []PinnedCellSpec{{PinnedCellID: "pin-1"}}},
	} {
		_, err := m.k.SetVirtualCluster(s)
		require.NoError(t, err)
		m.vcs[s.Name] = s
	}
	return m
}

func (m *modelRun) pick(list []string) string { return list[m.r.Intn(len(list))] }

func (m *modelRun) groupNames() []string {
	out := make([]string, 0, len(m.groups))
	for n := range m.groups {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (m *modelRun) vcNames() []string {
	out := make([]string, 0, len(m.vcs))
	for n := range m.vcs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (m *modelRun) fingerprint() string {
	return fmt.Sprintf("%+v", m.k.Snapshot())
}

// sameState fails the test with the first difference of two fingerprints.
func (m *modelRun) sameState(before string, why string, args ...any) {
	after := m.fingerprint()
	if before == after {
		return
	}
	i := 0
	for i < len(before) && i < len(after) && before[i] == after[i] {
		i++
	}
	lo := max(0, i-300)
	m.t.Fatalf("%s: state changed at offset %d:\nbefore: ...%s\nafter:  ...%s", fmt.Sprintf(why, args...), i,
		before[lo:min(len(before), i+200)], after[lo:min(len(after), i+200)])
}

func (m *modelRun) step(i int) {
	t := m.t
	op := m.r.Intn(100)
	switch {
	case op < 30:
		m.newGroup()
	case op < 40:
		m.retry()
	case op < 60:
		m.deletePod()
	case op < 67:
		m.deleteGroup()
	case op < 70:
		m.rollback()
	case op < 80:
		m.nodeHealth()
	case op < 83:
		m.deviceHealth()
	case op < 92:
		m.resizeVC()
	case op < 93:
		m.removeOrAddVC()
	case op < 95:
		m.restart()
	default:
		m.badRequest()
	}
	if err := m.k.CheckInvariants(); err != nil {
		t.Fatalf("step %d: %v", i, err)
	}
	m.requeueWaiting(i)
	if err := m.k.CheckInvariants(); err != nil {
		t.Fatalf("step %d, after requeueing: %v", i, err)
	}
	// Lazy unbinding is complete: a VC cell stays bound only while a
	// guaranteed leaf uses it (or it is pinned, or doomed). A binding left
	// with none holds the buddy split for nothing, and no later release
	// would undo it.
	if idle := idleBoundCells(m.k); len(idle) > 0 {
		t.Fatalf("step %d: VC cells bound with no guaranteed leaf in them: %v", i, idle)
	}
}

// requeueWaiting checks the VC guarantee after a step: every Pending
// guaranteed group that the oracle says fits its VC is scheduled again, as
// the plugin requeues waiting pods when cells change, and onDecision fails
// the test if it Waits. Highest priority first, then oldest, like the queue.
func (m *modelRun) requeueWaiting(step int) {
	type waiting struct {
		name string
		prio int32
		seq  int
	}
	var list []waiting
	for _, n := range m.groupNames() {
		s := m.groups[n]
		if s.Priority < 0 || modelLivenessExempt != nil && modelLivenessExempt(s) {
			continue
		}
		if st, ok := m.k.AffinityGroupState(n); ok && st == AGPending {
			var seq int
			_, _ = fmt.Sscanf(n, "g%d", &seq)
			list = append(list, waiting{n, s.Priority, seq})
		}
	}
	sort.Slice(list, func(a, b int) bool {
		if list[a].prio != list[b].prio {
			return list[a].prio > list[b].prio
		}
		return list[a].seq < list[b].seq
	})
	for _, w := range list {
		s, ok := m.groups[w.name]
		if !ok {
			continue // a victim of an earlier one
		}
		if st, ok := m.k.AffinityGroupState(w.name); !ok || st != AGPending {
			continue
		}
		v := m.k.guaranteeFits(s)
		m.stats["liveness-checked"]++
		if v.unboundUncertain {
			m.stats["liveness-unbound-uncertain"]++
		}
		if !v.fits {
			continue
		}
		m.stats["liveness-requeued"]++
		d, err := m.k.Schedule(s)
		if err != nil {
			// Its VC shrank below it: the plugin refuses the pods.
			m.stats["retry-invalid"]++
			_, derr := m.k.DeleteAffinityGroup(w.name)
			require.NoError(m.t, derr)
			delete(m.groups, w.name)
			continue
		}
		m.onDecision(s, d)
	}
}

func (m *modelRun) randomSpec() AffinityGroupSpec {
	m.next++
	vcs := m.vcNames()
	s := AffinityGroupSpec{Name: fmt.Sprintf("g%d", m.next), VirtualCluster: m.pick(vcs), Namespace: m.pick([]string{"ns-a", "ns-b", "ns-c"})}
	switch p := m.r.Intn(10); {
	case p < 3:
		s.Priority = -1
	default:
		s.Priority = int32(m.r.Intn(4) * 5)
	}
	switch m.r.Intn(4) {
	case 0:
		s.LeafCellType = "V100"
	case 1:
		s.LeafCellType = "T4"
	}
	s.LazyPreemptionEnable = m.r.Intn(3) == 0
	if m.r.Intn(3) == 0 {
		s.SpreadKey = m.pick([]string{"web", "db"})
	}
	if s.VirtualCluster == "vc3" && s.Priority >= 0 && m.r.Intn(2) == 0 {
		s.PinnedCellID = "pin-1"
		s.LeafCellType = "V100"
	}
	sizes := []int32{1, 1, 2, 4, 8}
	for n := m.r.Intn(2) + 1; n > 0; n-- {
		s.Members = append(s.Members, AffinityGroupMember{PodNumber: int32(m.r.Intn(3) + 1), LeafCellNumber: sizes[m.r.Intn(len(sizes))]})
	}
	if modelSpecHook != nil {
		modelSpecHook(m, &s)
	}
	if modelElasticHook != nil {
		modelElasticHook(m, &s)
	}
	return s
}

func (m *modelRun) newGroup() {
	s := m.randomSpec()
	before := ""
	if m.r.Intn(4) == 0 {
		before = m.fingerprint()
	}
	d, err := m.k.Schedule(s)
	if err != nil {
		if modelOutcomeHook != nil {
			modelOutcomeHook(m, s, d, err)
		}
		m.stats["invalid"]++
		if before != "" {
			m.sameState(before, "a refused request changed the state: %v", err)
		}
		return
	}
	m.groups[s.Name] = s
	m.onDecision(s, d)
}

func (m *modelRun) onDecision(s AffinityGroupSpec, d Decision) {
	t := m.t
	if modelOutcomeHook != nil {
		modelOutcomeHook(m, s, d, nil)
	}
	m.stats[d.Kind.String()]++
	if d.Kind == Wait && d.State == AGPending && s.Priority >= 0 && (modelLivenessExempt == nil || !modelLivenessExempt(s)) {
		// The guarantee: a group that fits its VC's cells never waits.
		v := m.k.guaranteeFits(s)
		m.stats["liveness-wait-checked"]++
		if d.OverLimit != v.overLimit {
			t.Fatalf("limits: %s (namespace %s, VC %s) decision says over its limit %v, the oracle %v (%s): %s", s.Name, s.Namespace, s.VirtualCluster, d.OverLimit, v.overLimit, v.why, d.Reason)
		}
		if v.overLimit {
			m.stats["liveness-over-limit"]++
		}
		if v.fits {
			t.Fatalf("guarantee broken: %s (priority %d, VC %s, members %+v, pinned %q) waits although it fits its VC: %s\nwait reason: %s",
				s.Name, s.Priority, s.VirtualCluster, s.Members, s.PinnedCellID, v.why, d.Reason+m.k.explainPool(s))
		}
	}
	if len(d.Downgraded) > 0 {
		m.stats["downgraded"] += len(d.Downgraded)
	}
	switch d.Kind {
	case Placed:
		require.Len(t, d.Pods, len(newGroup(s, nil, 0).slots))
		seen := map[string]bool{}
		for _, p := range d.Pods {
			require.Len(t, p.LeafCellIndices, int(p.LeafCellNumber))
			require.NotEmpty(t, p.Node)
			for _, idx := range p.LeafCellIndices {
				key := fmt.Sprintf("%s/%s/%d", p.Node, p.LeafCellType, idx)
				require.False(t, seen[key], "leaf %s twice in one group", key)
				seen[key] = true
			}
		}
		// Usually the whole gang arrives; sometimes only part of it.
		n := len(d.Pods)
		if m.r.Intn(5) == 0 {
			n = m.r.Intn(n + 1)
		}
		for i := 0; i < n; i++ {
			_, err := m.k.AssignPod(s.Name, fmt.Sprintf("%s-%d", s.Name, i), d.Pods[i].LeafCellNumber)
			require.NoError(t, err)
		}
		if n < len(d.Pods) && m.r.Intn(2) == 0 {
			require.NoError(t, m.k.RollbackAffinityGroup(s.Name))
			m.stats["rollback"]++
		}
	case Preempt:
		require.NotEmpty(t, d.Victims)
		// The plugin deletes the victims' pods, often right away.
		if m.r.Intn(3) > 0 {
			for _, v := range d.Victims {
				m.killGroup(v)
			}
			d2, err := m.k.Schedule(s)
			require.NoError(t, err)
			m.stats["retry-after-preempt"]++
			if d2.Kind == Placed {
				m.stats["e2"]++
			}
		}
	}
}

// killGroup deletes a group's pods, as the scheduler does to a victim.
func (m *modelRun) killGroup(name string) {
	st, ok := m.k.AffinityGroupStatus(name)
	if !ok {
		delete(m.groups, name)
		return
	}
	hasPods := false
	for _, p := range st.Pods {
		if p.PodKey != "" {
			hasPods = true
			_, err := m.k.DeletePod(name, p.PodKey)
			require.NoError(m.t, err)
		}
	}
	if !hasPods {
		_, err := m.k.DeleteAffinityGroup(name)
		require.NoError(m.t, err)
	}
	if _, ok := m.k.AffinityGroupStatus(name); !ok {
		delete(m.groups, name)
	}
}

func (m *modelRun) retry() {
	names := m.groupNames()
	if len(names) == 0 {
		return
	}
	n := m.pick(names)
	st, ok := m.k.AffinityGroupStatus(n)
	if !ok {
		delete(m.groups, n)
		return
	}
	if st.State != AGPending && st.State != AGPreempting {
		return
	}
	d, err := m.k.Schedule(m.groups[n])
	if err != nil {
		// Its VC may have been removed or shrunk below it.
		m.stats["retry-invalid"]++
		_, derr := m.k.DeleteAffinityGroup(n)
		require.NoError(m.t, derr)
		delete(m.groups, n)
		return
	}
	m.onDecision(m.groups[n], d)
}

func (m *modelRun) deletePod() {
	names := m.groupNames()
	if len(names) == 0 {
		return
	}
	n := m.pick(names)
	st, ok := m.k.AffinityGroupStatus(n)
	if !ok {
		delete(m.groups, n)
		return
	}
	var keys []string
	for _, p := range st.Pods {
		if p.PodKey != "" {
			keys = append(keys, p.PodKey)
		}
	}
	if len(keys) == 0 {
		return
	}
	res, err := m.k.DeletePod(n, m.pick(keys))
	require.NoError(m.t, err)
	m.stats["delete-pod"]++
	if res.GroupDeleted {
		delete(m.groups, n)
	}
	for _, p := range res.ReadyPreemptors {
		if s, ok := m.groups[p]; ok {
			d, err := m.k.Schedule(s)
			require.NoError(m.t, err)
			require.Equal(m.t, Placed, d.Kind, "ready preemptor %s not placed: %s", p, d.Reason)
			m.stats["e2"]++
			bindAll(m.t, m.k, d)
		}
	}
}

func (m *modelRun) deleteGroup() {
	names := m.groupNames()
	if len(names) == 0 {
		return
	}
	n := m.pick(names)
	_, err := m.k.DeleteAffinityGroup(n)
	require.NoError(m.t, err)
	delete(m.groups, n)
	m.stats["delete-group"]++
}

func (m *modelRun) rollback() {
	names := m.groupNames()
	if len(names) == 0 {
		return
	}
	n := m.pick(names)
	before := m.fingerprint()
	if err := m.k.RollbackAffinityGroup(n); err != nil {
		m.sameState(before, "a refused rollback changed the state")
		return
	}
	m.stats["rollback"]++
}

func (m *modelRun) nodeNames() []string {
	out := make([]string, 0, len(m.health))
	for n := range m.health {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (m *modelRun) nodeHealth() {
	n := m.pick(m.nodeNames())
	h := NodeHealthy
	switch {
	case m.mild && m.r.Intn(10) == 0:
		h = []NodeHealth{NodeBad, NodeMaintenance, NodeRetired}[m.r.Intn(3)]
	case !m.mild && m.r.Intn(2) == 0:
		h = []NodeHealth{NodeBad, NodeMaintenance, NodeRetired, NodeUnknown}[m.r.Intn(4)]
	}
	require.NoError(m.t, m.k.SetNodeHealth(n, h))
	m.health[n] = h
	m.stats["health"]++
}

func (m *modelRun) deviceHealth() {
	n := m.pick(m.nodeNames())
	if m.r.Intn(2) == 0 {
		m.nodeDevices(n)
		return
	}
	idx := int32(m.r.Intn(8))
	bad := m.r.Intn(2) == 0
	if m.mild {
		bad = m.r.Intn(20) == 0
	}
	err := m.k.SetLeafCellHealth(n, "", idx, bad)
	if err == nil {
		d := m.devices[n]
		h := DeviceGood
		if bad {
			h = DeviceBad
		}
		d.Devices = setDevice(d.Devices, idx, h)
		m.devices[n] = d
	}
}

// setDevice sets one named device's health in a node's list (Good drops it).
func setDevice(list []DeviceStatus, idx int32, h DeviceHealth) []DeviceStatus {
	out := list[:0:0]
	for _, d := range list {
		if d.Index != idx {
			out = append(out, d)
		}
	}
	if h != DeviceGood {
		out = append(out, DeviceStatus{Index: idx, Health: h})
	}
	return out
}

// nodeDevices changes what a node reports of its devices: a named device's
// state (any of seed 003's), devices unhealthy without a name, devices
// foreign pods hold (pods another scheduler placed), and devices named in
// device claims (DRA): some of the leaves the node's groups hold (the claims
// hivesched wrote for them, which stay claimed after the groups go until
// this input changes again, as claims are released after their pods) and
// some idle ones (other allocators' claims).
func (m *modelRun) nodeDevices(n string) {
	d := m.devices[n]
	switch m.r.Intn(5) {
	case 3, 4:
		d.Claimed = nil
		for _, l := range m.k.Snapshot().LeafCells {
			if l.Node != n {
				continue
			}
			busy := l.UsingGroup != "" || l.ReservingGroup != ""
			switch {
			case busy && m.r.Intn(3) != 0:
			case !busy && m.mild && m.r.Intn(10) == 0:
			case !busy && !m.mild && m.r.Intn(3) == 0:
			default:
				continue
			}
			d.Claimed = append(d.Claimed, DeviceRef{Index: l.Index})
		}
		if m.mild && m.r.Intn(3) == 0 {
			d.Claimed = nil
		}
		m.stats["claimed"]++
	case 0:
		h := DeviceHealth(m.r.Intn(int(DeviceRetired) + 1))
		if m.mild && m.r.Intn(4) != 0 {
			h = DeviceGood
		}
		d.Devices = setDevice(d.Devices, int32(m.r.Intn(8)), h)
	case 1:
		d.Unhealthy = int32(m.r.Intn(3))
		if m.mild && m.r.Intn(4) != 0 {
			d.Unhealthy = 0
		}
	default:
		d.Foreign = int32(m.r.Intn(4))
		if m.mild && m.r.Intn(2) != 0 {
			d.Foreign = 0
		}
	}
	// T4 nodes have 4 devices: a named index beyond is refused, the rest
	// applied.
	_ = m.k.SetNodeDevices(n, d)
	got, ok := m.k.NodeDevicesOf(n)
	require.True(m.t, ok)
	m.devices[n] = NodeDevices{Devices: setDevice(got.Devices, -1, DeviceGood), Unhealthy: got.Unhealthy, Foreign: got.Foreign, Claimed: got.Claimed}
	for i := range m.devices[n].Devices {
		m.devices[n].Devices[i].LeafCellType = ""
	}
	m.stats["node-devices"]++
}

// randomLimits draws namespace limits for a VC (often none): concurrency and
// usage limits that make groups wait, static ones that refuse them.
func (m *modelRun) randomLimits() map[string]NamespaceLimits {
	if m.r.Intn(3) == 0 {
		return nil
	}
	pick := func(vals ...int32) *int32 {
		if m.r.Intn(2) == 0 {
			return nil
		}
		v := vals[m.r.Intn(len(vals))]
		return &v
	}
	out := map[string]NamespaceLimits{}
	for _, ns := range []string{"ns-a", "ns-b", AllNamespaces} {
		if m.r.Intn(2) == 0 {
			out[ns] = NamespaceLimits{MaxLeafCells: pick(4, 8, 16, 24), MaxRunningGroups: pick(1, 2, 3), MaxGroupLeafCells: pick(8, 16), MaxPriority: pick(-1, 5, 10, 1000)}
		}
	}
	return out
}

func (m *modelRun) resizeVC() {
	n := m.pick(m.vcNames())
	s := m.vcs[n]
	ns := VirtualClusterSpec{Name: n, PinnedCells: s.PinnedCells, Sequencer: s.Sequencer, Selector: s.Selector, Limits: s.Limits}
	if m.r.Intn(3) == 0 {
		ns.Limits = m.randomLimits()
	}
	if m.r.Intn(3) == 0 {
		ns.Selector = []Selector{"", SelectorPack, SelectorSpread, SelectorRoundRobin}[m.r.Intn(4)]
		ns.Sequencer = []Sequencer{"", SequencerPriorityFIFO, SequencerPriorityLIFO, SequencerDRF}[m.r.Intn(4)]
	}
	types := []string{"V100-RACK", "V100-NODE", "V100-SOCKET", "V100-SWITCH", "V100", "T4-NODE"}
	for _, vcell := range s.VirtualCells {
		c := vcell.CellNumber + int32(m.r.Intn(3)-1)
		if c > 0 {
			ns.VirtualCells = append(ns.VirtualCells, VirtualCellSpec{CellType: vcell.CellType, CellNumber: c})
		}
	}
	if m.r.Intn(4) == 0 {
		ns.VirtualCells = append(ns.VirtualCells, VirtualCellSpec{CellType: m.pick(types), CellNumber: int32(m.r.Intn(2) + 1)})
	}
	before := m.fingerprint()
	res, err := m.k.SetVirtualCluster(ns)
	if err != nil {
		m.stats["vc-refused"]++
		m.sameState(before, "a refused VC change altered the state: %v", err)
		return
	}
	m.stats["vc-resize"]++
	m.stats["downgraded"] += len(res.Downgraded)
	m.vcs[n] = ns
}

func (m *modelRun) removeOrAddVC() {
	if _, ok := m.vcs["vc4"]; ok {
		_, err := m.k.RemoveVirtualCluster("vc4")
		require.NoError(m.t, err)
		delete(m.vcs, "vc4")
		return
	}
	s := vcSpec("vc4", "V100-NODE", 1)
	if _, err := m.k.SetVirtualCluster(s); err == nil {
		m.vcs["vc4"] = s
	}
}

// restart persists what a real cluster keeps (VCs, node health, running
// groups' placements on their pods) and rebuilds a new core from it (ec).
func (m *modelRun) restart() {
	t := m.t
	old := m.k
	snap := old.Snapshot()
	k, err := New(m.cfg)
	require.NoError(t, err)
	for _, n := range m.nodeNames() {
		require.NoError(t, k.SetNodeHealth(n, m.health[n]))
	}
	devNodes := make([]string, 0, len(m.devices))
	for n := range m.devices {
		devNodes = append(devNodes, n)
	}
	// In an order drawn from the run's seed: orders vary, a seed replays.
	sort.Strings(devNodes)
	m.r.Shuffle(len(devNodes), func(i, j int) { devNodes[i], devNodes[j] = devNodes[j], devNodes[i] })
	for _, n := range devNodes {
		require.NoError(t, k.SetNodeDevices(n, m.devices[n]))
	}
	for _, n := range m.vcNames() {
		_, err := k.SetVirtualCluster(m.vcs[n])
		require.NoError(t, err)
	}
	used := map[string]string{}
	for _, g := range snap.AffinityGroups {
		if g.State != AGAllocated && g.State != AGBeingPreempted {
			// Volatile or unbound: the plugin schedules its pods again.
			continue
		}
		var pods []RecoveredPod
		for _, p := range g.Pods {
			if p.PodKey != "" {
				// The plugin persists a lazy downgrade on the pods.
				pods = append(pods, RecoveredPod{PodKey: p.PodKey, Node: p.Node, LeafCellIndices: p.LeafCellIndices, Downgraded: g.Downgraded})
			}
		}
		if len(pods) == 0 {
			continue
		}
		spec := m.groups[g.Name]
		res, err := k.RecoverAffinityGroup(spec, pods)
		require.NoError(t, err, "recovering %s", g.Name)
		if res.Downgraded {
			m.stats["recover-downgraded"]++
		}
		st, ok := k.AffinityGroupStatus(g.Name)
		require.True(t, ok)
		require.Equal(t, AGAllocated, st.State)
		for _, p := range st.Pods {
			for _, idx := range p.LeafCellIndices {
				if p.PodKey == "" {
					continue
				}
				key := fmt.Sprintf("%s/%s/%d", p.Node, p.LeafCellType, idx)
				require.Empty(t, used[key], "leaf %s double booked by %s and %s", key, used[key], g.Name)
				used[key] = g.Name
			}
		}
	}
	// A recovered group's pods must be on exactly the cells they had.
	for _, g := range snap.AffinityGroups {
		st, ok := k.AffinityGroupStatus(g.Name)
		if !ok {
			delete(m.groups, g.Name)
			continue
		}
		for _, p := range g.Pods {
			if p.PodKey == "" {
				continue
			}
			found := false
			for _, q := range st.Pods {
				if q.PodKey == p.PodKey {
					found = true
					require.Equal(t, p.Node, q.Node)
					require.Equal(t, p.LeafCellIndices, q.LeafCellIndices)
				}
			}
			require.True(t, found, "pod %s of %s lost in recovery", p.PodKey, g.Name)
		}
	}
	for n := range m.groups {
		if _, ok := k.AffinityGroupStatus(n); !ok {
			delete(m.groups, n) // Pending and Preempting groups are rescheduled as new
		}
	}
	m.k = k
	m.stats["restart"]++
	// Some members that were not running come back after the restart (x3).
	for _, n := range m.groupNames() {
		st, ok := k.AffinityGroupStatus(n)
		if !ok || st.State != AGAllocated || m.r.Intn(2) == 0 {
			continue
		}
		for i, p := range st.Pods {
			if p.PodKey == "" {
				if _, err := k.AssignPod(n, fmt.Sprintf("%s-late-%d", n, i), p.LeafCellNumber); err == nil {
					m.stats["x3"]++
				}
			}
		}
	}
}

func (m *modelRun) badRequest() {
	s := m.randomSpec()
	switch m.r.Intn(6) {
	case 0:
		s.VirtualCluster = "no-such-vc"
	case 1:
		s.LeafCellType = "H100"
	case 2:
		s.Members[0].LeafCellNumber = 16
	case 3:
		s.Priority = 1001
	case 4:
		s.Members[0].PodNumber = 0
	case 5:
		s.Members = []AffinityGroupMember{{PodNumber: 200, LeafCellNumber: 8}}
		s.Priority = 1
	}
	before := m.fingerprint()
	_, err := m.k.Schedule(s)
	require.Error(m.t, err)
	m.sameState(before, "bad request %+v changed the state", s)
	m.stats["bad-request"]++
}

// livenessTotals sums the guarantee checks of all runs for the report.
var livenessTotals livenessCounts

type livenessCounts struct {
	sync.Mutex
	checked, waits, requeued, uncertain [2]int // by hardware profile: harsh, mild
}

func (l *livenessCounts) add(m *modelRun) {
	l.Lock()
	defer l.Unlock()
	i := 0
	if m.mild {
		i = 1
	}
	l.checked[i] += m.stats["liveness-checked"]
	l.waits[i] += m.stats["liveness-wait-checked"]
	l.requeued[i] += m.stats["liveness-requeued"]
	l.uncertain[i] += m.stats["liveness-unbound-uncertain"]
}

func (l *livenessCounts) report(t *testing.T) {
	l.Lock()
	defer l.Unlock()
	for i, name := range []string{"harsh", "mild"} {
		t.Logf("VC guarantee, %s hardware faults: %d Wait decisions of Pending guaranteed groups checked against the oracle, %d pending groups checked after steps (%d fitted and were scheduled again, none waited); %d of those checks (%.1f%%) were weaker: the group would have fitted counting unbound virtual cells that damaged free cells could not all back",
			name, l.waits[i], l.checked[i], l.requeued[i], l.uncertain[i], 100*float64(l.uncertain[i])/float64(max(1, l.checked[i])))
	}
}

func TestModelRandomized(t *testing.T) {
	const runs = 4
	per := *modelOps / runs
	for r := 0; r < runs; r++ {
		seed := *modelSeed + int64(r)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			m := newModelRun(t, seed)
			m.mild = r >= runs/2
			digest := sha256.New()
			for i := 0; i < per; i++ {
				m.step(i)
				if *modelDigest {
					digest.Write([]byte(m.fingerprint()))
				}
			}
			t.Logf("%d operations (mild hardware faults: %v): %v", per, m.mild, m.stats)
			if *modelDigest {
				t.Logf("seed %d: digest of the states after every step: %x", seed, digest.Sum(nil))
			}
			livenessTotals.add(m)
		})
	}
	t.Cleanup(func() {
		livenessTotals.report(t)
		if modelReportHook != nil {
			modelReportHook(t)
		}
		t.Logf("preemption searches stopped at their floor (each checked against the full scan): %d", preemptFloorHits.Load())
		t.Logf("placements spread by the Spread selector: %d", spreadPlaced.Load())
	})
}
