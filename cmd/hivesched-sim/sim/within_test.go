package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

const cliqueKey = "nvidia.com/gpu.clique"

// twoCliques is 2 NVLink domains (cliques) of 2 nodes of 4 GB200: d0 =
// n0, n1 and d1 = n2, n3; VCs a and b own one domain each.
func twoCliques() (cellcore.Config, []cellcore.VirtualClusterSpec) {
	node := func(n string) cellcore.PhysicalCellSpec { return cellcore.PhysicalCellSpec{CellAddress: n} }
	cfg := cellcore.Config{
		CellTypes: map[string]cellcore.CellTypeSpec{
			"GB200-NODE": {ChildCellType: "GB200", ChildCellNumber: 4, IsNodeLevel: true},
			"NVL":        {ChildCellType: "GB200-NODE", ChildCellNumber: 2, TopologyKey: cliqueKey},
		},
		PhysicalCells: []cellcore.PhysicalCellSpec{
			{CellType: "NVL", CellAddress: "d0", CellChildren: []cellcore.PhysicalCellSpec{node("n0"), node("n1")}},
			{CellType: "NVL", CellAddress: "d1", CellChildren: []cellcore.PhysicalCellSpec{node("n2"), node("n3")}},
		},
	}
	vcs := []cellcore.VirtualClusterSpec{
		{Name: "a", VirtualCells: []cellcore.VirtualCellSpec{{CellType: "NVL", CellNumber: 1}}},
		{Name: "b", VirtualCells: []cellcore.VirtualCellSpec{{CellType: "NVL", CellNumber: 1}}},
	}
	return cfg, vcs
}

func withinJob(j Job) Job { j.Within = cliqueKey; return j }

// podDomains are the domains (of cliqueKey) of a run's pods.
func podDomains(r *run) []string {
	var out []string
	for _, pa := range r.ranOn {
		out = append(out, map[string]string{"n0": "d0", "n1": "d0", "n2": "d1", "n3": "d1"}[pa.node])
	}
	return out
}

// Issue 45's case, by hand. Tenant a owns one NVLink domain, b the other.
// At 0 a runs a 1x4 job (a1, 10 s); b fills its whole domain with eight
// 1-GPU jobs (100 s) and asks for four more as opportunistic work. At 20 a
// asks for its whole domain: a 2x4 job that must stay in one clique (a2).
//   - hivesched: b's guaranteed jobs are in b's domain, its opportunistic
//     ones on a's idle node; a2 preempts those four and starts at 20 in
//     one domain, as on a's private cluster.
//   - quota-first-fit: a1 took n0, b's eight n1 and n2 (b's quota is full,
//     its opportunistic jobs wait); at 20 the free nodes are n0 and n3, in
//     two domains: a2 starts at once, split (it runs without NVLink
//     between its nodes).
//   - quota-one-clique: the same layout (best fit); each domain has 4 free
//     GPUs, neither 8: a2 waits, with a's quota untouched, until b's jobs
//     end at 100. Meanwhile 8 GPUs sit idle in fragmented domains.
func TestWithinWholeDomain(t *testing.T) {
	cfg, vcs := twoCliques()
	jobs := []Job{job("a1", "a", 0, 10, 0, 1, 4)}
	for _, id := range []string{"b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8"} {
		jobs = append(jobs, job(id, "b", 0, 100, 0, 1, 1))
	}
	for _, id := range []string{"o1", "o2", "o3", "o4"} {
		jobs = append(jobs, job(id, "b", 0, 100, -1, 1, 1))
	}
	jobs = append(jobs, withinJob(job("a2", "a", 20, 50, 0, 2, 4)))
	require.Equal(t, AllPolicies, PoliciesFor(jobs))
	rep, err := Run(&Input{Cluster: cfg, VCs: vcs, Jobs: jobs, Policies: []string{"hivesched", "quota-first-fit", "quota-one-clique"},
		Tolerance: 10, SampleEvery: 10, LateAfter: 60})
	require.NoError(t, err)
	require.Equal(t, float64(0), rep.privateDelays()["a2"], "privately a2 starts on arrival")

	hs := result(t, rep, "hivesched")
	a2 := runOf(hs, "a2")
	require.True(t, a2.started)
	require.Equal(t, float64(20), a2.start)
	require.False(t, a2.split)
	d := podDomains(a2)
	require.Len(t, d, 2)
	require.Equal(t, d[0], d[1], "a2 in one domain: %+v", a2.ranOn)
	require.Equal(t, 4, hs.Preemptions, "b's four opportunistic jobs on a's idle node")
	for _, id := range []string{"o1", "o2", "o3", "o4"} {
		o := runOf(hs, id)
		require.Equal(t, 1, o.preempts, id)
		require.Equal(t, float64(70), o.start, "%s runs again once a2 ends", id)
	}
	require.Equal(t, withinCompared{jobs: 1, shared: 0, private: 0}, rep.compareWithin(hs, cliqueKey, ""))

	ff := result(t, rep, "quota-first-fit")
	a2 = runOf(ff, "a2")
	require.Equal(t, float64(20), a2.start)
	require.True(t, a2.split)
	require.Equal(t, []string{"d0", "d1"}, podDomains(a2))
	require.Equal(t, []podAt{{"n0", 4}, {"n3", 4}}, a2.ranOn)
	c := rep.compareWithin(ff, cliqueKey, "")
	require.Equal(t, 1, c.anomalies)
	require.Equal(t, 1, c.split)
	require.Zero(t, c.waited)
	require.Zero(t, rep.compare(ff, "").anomalies, "on time: the general count misses it; the domain count does not")

	oc := result(t, rep, "quota-one-clique")
	a2 = runOf(oc, "a2")
	require.Equal(t, float64(100), a2.start)
	require.False(t, a2.split)
	require.Equal(t, []podAt{{"n0", 4}, {"n1", 4}}, a2.ranOn, "both domains empty at 100: the first")
	c = rep.compareWithin(oc, cliqueKey, "")
	require.Equal(t, withinCompared{jobs: 1, anomalies: 1, waited: 1, shared: 80.0 / 60}, c)

	// Fragmentation, by hand (a sample at s is the state after the events
	// up to s). Idle in fragmented domains: only while a2 waits (samples
	// 20..90), each domain has 4 free GPUs and cannot host 2x4: 8. Free in
	// partly used domains: at 0 d1 (n2 used, n3 free): 4; 10..90 d0 too
	// (a1 gone, n1 used): 8; 100..140 d1 (o1-o4 on n2, a2 fills d0): 4;
	// 150..190 a2 gone, d0 empty: still 4; at 200 everything has ended.
	ds := oc.Domains[cliqueKey]
	require.NotNil(t, ds)
	require.Equal(t, 2, ds.Domains)
	require.Equal(t, int64(16), ds.GPUs)
	require.Equal(t, []int64{0, 0, 8, 8, 8, 8, 8, 8, 8, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ds.Fragmented)
	require.Equal(t, []int64{4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0}, ds.Partial)
	require.Equal(t, 3, oc.SubmitSamples, "samples at 0, 10, 20: up to a2's submission")
	f, p, fs, ps := domainIdleMeans(oc, cliqueKey)
	require.InDelta(t, 8.0/3, f, 1e-9)
	require.InDelta(t, 20.0/3, p, 1e-9)
	require.InDelta(t, 8.0/3/16, fs, 1e-9)
	require.InDelta(t, 20.0/3/16, ps, 1e-9)
	for _, res := range []*Result{hs, ff} {
		for i, x := range res.Domains[cliqueKey].Fragmented {
			require.Zero(t, x, "%s: no within-job ever waits (sample %d)", res.Policy, i)
		}
	}

	dir := t.TempDir()
	require.NoError(t, rep.WriteReport(dir))
	b, err := os.ReadFile(filepath.Join(dir, "report.md"))
	require.NoError(t, err)
	for _, row := range []string{
		"| hivesched | `nvidia.com/gpu.clique` | 2 (16) | 1 | 0 | 0 | 0 | 0 | 0.0 (0.0%) |",
		"| quota-first-fit | `nvidia.com/gpu.clique` | 2 (16) | 1 | 1 | 1 | 0 | 0 | 0.0 (0.0%) |",
		"| quota-one-clique | `nvidia.com/gpu.clique` | 2 (16) | 1 | 1 | 0 | 1 | 0 | 2.7 (16.7%) |",
	} {
		require.Contains(t, string(b), row)
	}
}

// domainIdle on a hand-checked instant: three domains of two 4-GPU nodes.
// d0: 3 free + 4 free (1 in use); d1: 2 + 2 free (4 in use); d2: one node
// failed, the other empty (4 free, nothing in use). Waiting: a 2x4 job.
// d0 can host it? 3/4 + 4/4 = 1 pod: no. d1: 0 pods: no. d2: 1 pod: no.
// So every free GPU is in a fragmented domain: 7 + 4 + 4 = 15; partly in
// use: d0 and d1 (7 + 4 = 11); d2 is not (its only up node is empty).
// With a 1x4 job waiting too, d0 and d2 can host that: only d1's 4.
func TestDomainIdle(t *testing.T) {
	ds := []domain{
		{id: "d0", nodes: []string{"a", "b"}, gpus: 8, leafType: "GB200"},
		{id: "d1", nodes: []string{"c", "d"}, gpus: 8, leafType: "GB200"},
		{id: "d2", nodes: []string{"e", "f"}, gpus: 8, leafType: "GB200"},
	}
	freeM := map[string]int32{"a": 3, "b": 4, "c": 2, "d": 2, "e": 0, "f": 4}
	usedM := map[string]int32{"a": 1, "b": 0, "c": 2, "d": 2, "e": 0, "f": 0} // e failed: 0 and 0
	free := func(n string) int32 { return freeM[n] }
	used := func(n string) int32 { return usedM[n] }
	f, p := domainIdle(ds, free, used, []domainShape{{pods: 2, leaves: 4}})
	require.Equal(t, int64(15), f)
	require.Equal(t, int64(11), p)
	f, p = domainIdle(ds, free, used, []domainShape{{pods: 2, leaves: 4}, {pods: 1, leaves: 4, leafType: "GB200"}})
	require.Equal(t, int64(4), f)
	require.Equal(t, int64(11), p)
	f, _ = domainIdle(ds, free, used, []domainShape{{pods: 1, leaves: 4, leafType: "H100"}})
	require.Equal(t, int64(15), f, "a job of another GPU type fits no GB200 domain")
	f, p = domainIdle(ds, free, used, nil)
	require.Zero(t, f, "nothing waits: nothing is idle for a waiting job")
	require.Equal(t, int64(11), p)
}

// The trace format's within_topology_key column: optional on reading,
// written only when some job has one.
func TestWithinCSV(t *testing.T) {
	jobs, err := ReadCSV(strings.NewReader("id,submit_seconds,duration_seconds,virtual_cluster,priority,pods,leaf_cells_per_pod,leaf_cell_type,lazy_preemption,within_topology_key\n" +
		"a,0,10,vc1,0,18,4,GB200,false,nvidia.com/gpu.clique\nb,1,10,vc1,0,1,1,GB200\nc,2,10,vc1,0,1,1,,true,\n"))
	require.NoError(t, err)
	require.Equal(t, []string{cliqueKey, "", ""}, []string{jobs[0].Within, jobs[1].Within, jobs[2].Within})
	require.True(t, jobs[2].Lazy)
	var out strings.Builder
	require.NoError(t, WriteCSV(&out, jobs))
	require.True(t, strings.HasPrefix(out.String(), strings.Join(CSVHeader, ",")+"\n"))
	back, err := ReadCSV(strings.NewReader(out.String()))
	require.NoError(t, err)
	require.Equal(t, jobs, back)
	out.Reset()
	require.NoError(t, WriteCSV(&out, jobs[1:]))
	require.Equal(t, "id,submit_seconds,duration_seconds,virtual_cluster,priority,pods,leaf_cells_per_pod,leaf_cell_type,lazy_preemption\nb,1,10,vc1,0,1,1,GB200,false\nc,2,10,vc1,0,1,1,,true\n", out.String(),
		"a trace without within jobs is written as before the column existed")
}

// halvesCluster is one NVLink domain (cliqueKey) of two halves of two
// 4-GPU nodes; VC c owns both halves (each inside the one domain), VC d
// nothing but a node of another chain.
func halvesCluster() (cellcore.Config, []cellcore.VirtualClusterSpec) {
	node := func(n string) cellcore.PhysicalCellSpec { return cellcore.PhysicalCellSpec{CellAddress: n} }
	cfg := cellcore.Config{
		CellTypes: map[string]cellcore.CellTypeSpec{
			"GB200-NODE": {ChildCellType: "GB200", ChildCellNumber: 4, IsNodeLevel: true, TopologyKey: "kubernetes.io/hostname"},
			"HALF":       {ChildCellType: "GB200-NODE", ChildCellNumber: 2},
			"NVL":        {ChildCellType: "HALF", ChildCellNumber: 2, TopologyKey: cliqueKey},
			"H100-NODE":  {ChildCellType: "H100", ChildCellNumber: 8, IsNodeLevel: true, TopologyKey: "kubernetes.io/hostname"},
		},
		PhysicalCells: []cellcore.PhysicalCellSpec{
			{CellType: "NVL", CellAddress: "d0", CellChildren: []cellcore.PhysicalCellSpec{
				{CellAddress: "h0", CellChildren: []cellcore.PhysicalCellSpec{node("n0"), node("n1")}},
				{CellAddress: "h1", CellChildren: []cellcore.PhysicalCellSpec{node("n2"), node("n3")}}}},
			{CellType: "H100-NODE", CellAddress: "x0"},
		},
	}
	vcs := []cellcore.VirtualClusterSpec{
		{Name: "c", VirtualCells: []cellcore.VirtualCellSpec{{CellType: "HALF", CellNumber: 2}}},
		{Name: "d", VirtualCells: []cellcore.VirtualCellSpec{{CellType: "H100-NODE", CellNumber: 1}}},
	}
	return cfg, vcs
}

// A VC that owns parts of a domain (halves) is, on its private cluster,
// given each half as a domain of its own: a within-job that fits a half
// runs there; one that needs both halves has no promise (the shared
// cluster could bind them in different domains) and is refused privately.
func TestPrivateHalvesAreDomains(t *testing.T) {
	cfg, vcs := halvesCluster()
	require.Equal(t, []string{cliqueKey}, keysAbove(cfg, "HALF"))
	require.Empty(t, keysAbove(cfg, "NVL"), "its own key is not above it")
	require.Empty(t, keysAbove(cfg, "H100-NODE"), "no keyed level above an H100 node")
	require.Equal(t, []string{cliqueKey}, keysAbove(cfg, "GB200-NODE"), "hostname is its own level, the clique above")

	pc, own := privateConfig(cfg, vcs[0])
	require.Equal(t, vcs[0].VirtualCells, own.VirtualCells)
	require.Equal(t, cellcore.CellTypeSpec{ChildCellType: "HALF", ChildCellNumber: 1, TopologyKey: cliqueKey}, pc.CellTypes["HALF-DOMAIN0"])
	require.NotContains(t, cfg.CellTypes, "HALF-DOMAIN0", "the shared configuration is not changed")
	require.Len(t, pc.PhysicalCells, 2)
	tp := newTopology(pc)
	require.Len(t, tp.domains[cliqueKey], 2, "each half a domain")
	pd, _ := privateConfig(cfg, vcs[1])
	require.Equal(t, []cellcore.PhysicalCellSpec{{CellType: "H100-NODE", CellAddress: "d-H100-NODE-0"}}, pd.PhysicalCells)

	jobs := []Job{
		withinJob(job("c1", "c", 0, 10, 0, 2, 4)),
		withinJob(job("c2", "c", 0, 10, 0, 4, 4)),
	}
	rep, err := Run(&Input{Cluster: cfg, VCs: vcs, Jobs: jobs, Policies: []string{"hivesched"}, Tolerance: 10, SampleEvery: 10})
	require.NoError(t, err)
	priv := rep.Private["c"]
	require.True(t, runOf(priv, "c1").started)
	require.Equal(t, "", runOf(priv, "c1").invalid)
	require.False(t, runOf(priv, "c2").started)
	require.Contains(t, runOf(priv, "c2").invalid, "does not fit in one HALF-DOMAIN0")
	hs := result(t, rep, "hivesched")
	require.Equal(t, float64(0), runOf(hs, "c1").start)
	require.False(t, runOf(hs, "c1").split)
	c := rep.compareWithin(hs, cliqueKey, "c")
	require.Equal(t, 1, c.jobs, "c2 has no private reference: not counted")
	require.Zero(t, c.anomalies)
}

// quota-one-clique refuses a within-job larger than any domain, as the
// core does; the topology-blind quota places it anyway, split.
func TestOneCliqueTooLarge(t *testing.T) {
	cfg, vcs := twoCliques()
	vcs[0].VirtualCells[0].CellNumber = 2
	vcs = vcs[:1]
	jobs := []Job{withinJob(job("big", "a", 0, 10, 0, 4, 4))}
	rep, err := Run(&Input{Cluster: cfg, VCs: vcs, Jobs: jobs, Policies: []string{"hivesched", "quota-first-fit", "quota-one-clique"}, Tolerance: 10, SampleEvery: 10})
	require.NoError(t, err)
	require.Contains(t, runOf(result(t, rep, "quota-one-clique"), "big").invalid, "more than its largest (8)")
	require.Contains(t, runOf(result(t, rep, "hivesched"), "big").invalid, "does not fit in one NVL")
	ff := runOf(result(t, rep, "quota-first-fit"), "big")
	require.True(t, ff.started)
	require.True(t, ff.split)
}

// The generator gives a shape's jobs its withinTopologyKey.
func TestGeneratorWithin(t *testing.T) {
	g := Generator{Seed: 1, Days: 1, Tenants: []TenantLoad{{VC: "a", JobsPerHour: 10, Shapes: []Shape{
		{Pods: 1, LeavesPerPod: 1, Weight: 1, MedianMinutes: 5},
		{Pods: 18, LeavesPerPod: 4, Weight: 1, MedianMinutes: 5, WithinTopologyKey: cliqueKey},
	}}}}
	jobs, err := g.Generate()
	require.NoError(t, err)
	n := 0
	for _, j := range jobs {
		require.Equal(t, j.Pods == 18, j.Within == cliqueKey, j.ID)
		if j.Within != "" {
			n++
		}
	}
	require.NotZero(t, n)
	require.Less(t, n, len(jobs))
}

// TestNVL72Scenario: the shipped NVL72 scenario (make sim-nvl72) loads and
// a day of it runs: labelled synthetic, every policy of AllPolicies by
// default, hivesched never splits a job across domains nor fails one of
// vc-frontier's (which owns whole domains), quota-first-fit splits some,
// quota-one-clique never splits. The full run takes seconds and is
// documented, not run here.
func TestNVL72Scenario(t *testing.T) {
	root := filepath.Join("..", "..", "..", "manifests", "sim", "nvl72")
	cl, err := LoadCluster(filepath.Join(root, "scheduler-config.yaml"))
	require.NoError(t, err)
	vcs, err := LoadVirtualClusters(filepath.Join(root, "virtualclusters.yaml"))
	require.NoError(t, err)
	path := filepath.Join(root, "generator.yaml")
	g, err := LoadGenerator(path)
	require.NoError(t, err)
	require.Empty(t, g.Calibration, "a hand-chosen mix")
	g.Days = 1
	jobs, err := g.Generate()
	require.NoError(t, err)
	tp := newTopology(cl)
	require.Len(t, tp.domains[cliqueKey], 6)
	for _, d := range tp.domains[cliqueKey] {
		require.Len(t, d.nodes, 18, d.id)
		require.Equal(t, int64(72), d.gpus, d.id)
		require.Equal(t, "GB200", d.leafType, d.id)
	}
	rep, err := Run(&Input{Cluster: cl, VCs: vcs, Jobs: jobs, Policies: PoliciesFor(jobs), Tolerance: 600, SampleEvery: 600, LateAfter: 3600,
		Source: g.Source(path), Notes: g.Notes()})
	require.NoError(t, err)
	require.Len(t, rep.Results, len(AllPolicies))
	hs := result(t, rep, "hivesched")
	require.Zero(t, rep.compareWithin(hs, cliqueKey, "").split)
	fr := rep.compareWithin(hs, cliqueKey, "vc-frontier")
	require.NotZero(t, fr.jobs)
	require.Zero(t, fr.anomalies, "vc-frontier owns whole domains")
	require.NotZero(t, rep.compareWithin(result(t, rep, "quota-first-fit"), cliqueKey, "").split)
	require.Zero(t, rep.compareWithin(result(t, rep, "quota-one-clique"), cliqueKey, "").split)
	for _, r := range hs.Runs {
		require.Empty(t, r.invalid, r.job.ID)
	}
	out := t.TempDir()
	require.NoError(t, rep.WriteReport(out))
	b, err := os.ReadFile(filepath.Join(out, "report.md"))
	require.NoError(t, err)
	require.Contains(t, string(b), "**Jobs: synthetic, not real")
	require.Contains(t, string(b), "## One domain per job")
}
