package integration

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"k8s.io/component-base/metrics/legacyregistry"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
)

// freeAddr is a loopback address with a port nobody listens on now.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// inspectGet GETs an inspect API path as the cluster's admin and decodes
// the answer into out, returning the status code (an Error body for codes
// other than 200).
func (c *cluster) inspectGet(t *testing.T, addr, path string, out any) int {
	t.Helper()
	return inspectGetAs(t, c.cfg.BearerToken, addr, path, out)
}

// inspectGetAs is inspectGet with a bearer token ("" none).
func inspectGetAs(t *testing.T, token, addr, path string, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+iv1.PathPrefix+path, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK {
		var e iv1.Error
		require.NoError(t, json.Unmarshal(body, &e), "%s", body)
		require.NotEmpty(t, e.Error)
		if p, ok := out.(*iv1.Error); ok {
			*p = e
		}
		return resp.StatusCode
	}
	require.NoError(t, json.Unmarshal(body, out), "%s", body)
	return resp.StatusCode
}

// metricsScrape reads the process's metrics as kube-scheduler serves them on
// /metrics (the same registry and handler), over HTTP in the text format.
type metricsScrape map[string]*dto.MetricFamily

func scrape(t *testing.T) metricsScrape {
	t.Helper()
	srv := httptest.NewServer(legacyregistry.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// value is the sample of family name whose labels include want (a counter,
// gauge, or a histogram's count); 0 if there is none.
func (m metricsScrape) value(name string, want map[string]string) float64 {
	f := m[name]
	if f == nil {
		return 0
	}
	var sum float64
	for _, s := range f.Metric {
		have := map[string]string{}
		for _, l := range s.Label {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if have[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case s.Gauge != nil:
			sum += s.Gauge.GetValue()
		case s.Counter != nil:
			sum += s.Counter.GetValue()
		case s.Histogram != nil:
			sum += float64(s.Histogram.GetSampleCount())
		}
	}
	return sum
}

// leavesOf counts the leaf cells of a tree that satisfy keep.
func leavesOf(cells []iv1.Cell, keep func(*iv1.Cell) bool) int {
	n := 0
	for i := range cells {
		c := &cells[i]
		if c.Level == 1 && keep(c) {
			n++
		}
		n += leavesOf(c.Children, keep)
	}
	return n
}

// The inspect API and the metrics agree with a known state: one VC full with
// a gang, a group of the same VC waiting for it, an opportunistic job in
// another; then a preemption and a restart move the counters.
func TestInspectAndMetrics(t *testing.T) {
	c := startCluster(t)
	const ns = "ins"
	c.createNodes(t, ns, 1, 4, 0)
	c.createNamespace(t, ns)
	c.createVC(t, "ins-a", []string{ns}, "V100-NODE", 2)
	c.createVC(t, "ins-b", []string{ns}, "V100-NODE", 1)
	physical := physicalCluster(ns, 1, 4, 0)
	addr := freeAddr(t)
	s := c.startScheduler(t, physical, withInspect(addr))
	before := scrape(t)

	g1 := gangPods(ns, "g1", "ins-a", 0, 2, 8)
	c.createPods(t, g1)
	c.waitBound(t, g1, 30*time.Second)
	o1 := gangPods(ns, "o1", "ins-b", -1, 1, 4)
	c.createPods(t, o1)
	oNode := c.waitBound(t, o1, 30*time.Second)[0]
	g2 := gangPods(ns, "g2", "ins-a", 0, 1, 8)
	c.createPods(t, g2)
	c.failedScheduling(t, g2[0], "", 30*time.Second)

	t.Run("cells: the tree, narrowed to a VC or a node", func(t *testing.T) {
		var all iv1.ClusterCells
		require.Equal(t, http.StatusOK, c.inspectGet(t, addr, "cells", &all))
		require.Len(t, all.Chains, 1)
		ch := all.Chains[0]
		require.Equal(t, "V100", ch.LeafCellType)
		require.Equal(t, []string{"V100", "V100-SWITCH", "V100-SOCKET", "V100-NODE", "V100-RACK"}, ch.Levels)
		require.Len(t, ch.Cells, 1)
		rack := ch.Cells[0]
		require.Equal(t, int32(32), rack.Leaves)
		require.Equal(t, int32(20), rack.UsedLeaves)
		require.Len(t, rack.Children, 4)
		require.Equal(t, 32, leavesOf(ch.Cells, func(*iv1.Cell) bool { return true }))
		require.Equal(t, 16, leavesOf(ch.Cells, func(c *iv1.Cell) bool { return c.Group == ns+"/g1" && c.State == "Used" && *c.Priority == 0 }))
		require.Equal(t, 4, leavesOf(ch.Cells, func(c *iv1.Cell) bool { return c.Group == ns+"/o1" && *c.Priority == -1 && c.Node == oNode }))
		require.Equal(t, 16, leavesOf(ch.Cells, func(c *iv1.Cell) bool { return c.VirtualCluster == "ins-a" }))

		var a iv1.ClusterCells
		require.Equal(t, http.StatusOK, c.inspectGet(t, addr, "cells?vc=ins-a", &a))
		require.Equal(t, "ins-a", a.Filter.VirtualCluster)
		require.Equal(t, 16, leavesOf(a.Chains[0].Cells, func(*iv1.Cell) bool { return true }), "the VC's cells only")
		require.Len(t, a.Chains[0].Cells[0].Children, 2, "its two nodes under their rack")

		var e iv1.Error
		require.Equal(t, http.StatusNotFound, c.inspectGet(t, addr, "cells?node=nope", &e))
		require.Contains(t, e.Error, `node "nope" is not in the physical cluster`)
		require.Equal(t, http.StatusNotFound, c.inspectGet(t, addr, "cells?vc=nope", &e))

		var n iv1.ClusterCells
		require.Equal(t, http.StatusOK, c.inspectGet(t, addr, "cells?node="+oNode, &n))
		require.Equal(t, 8, leavesOf(n.Chains[0].Cells, func(*iv1.Cell) bool { return true }))
		require.Equal(t, 4, leavesOf(n.Chains[0].Cells, func(c *iv1.Cell) bool { return c.State == "Used" }))
	})

	t.Run("virtual clusters and groups", func(t *testing.T) {
		var a iv1.VirtualCluster
		require.Equal(t, http.StatusOK, c.inspectGet(t, addr, "virtualclusters/ins-a", &a))
		require.Equal(t, "Active", a.State)
		require.Equal(t, iv1.LeafCounts{Total: 16, Used: 16}, a.LeafCells)
		require.Equal(t, map[string]int{"Allocated": 1, "Pending": 1}, a.AffinityGroups)
		require.Len(t, a.Cells, 1)
		require.Equal(t, "V100-NODE", a.Cells[0].CellType)
		require.Equal(t, int32(2), a.Cells[0].Bound)
		require.Len(t, a.Cells[0].Physical, 2)
		var b iv1.VirtualCluster
		require.Equal(t, http.StatusOK, c.inspectGet(t, addr, "virtualclusters/ins-b", &b))
		require.Equal(t, int32(4), b.LeafCells.Opportunistic)
		var all []iv1.VirtualCluster
		require.Equal(t, http.StatusOK, c.inspectGet(t, addr, "virtualclusters", &all))
		require.Len(t, all, 2)
		var e iv1.Error
		require.Equal(t, http.StatusNotFound, c.inspectGet(t, addr, "virtualclusters/nope", &e))
		require.Contains(t, e.Error, `"nope" is not known`)

		var groups []iv1.AffinityGroup
		require.Equal(t, http.StatusOK, c.inspectGet(t, addr, "affinitygroups", &groups))
		require.Len(t, groups, 3)
		var g iv1.AffinityGroup
		require.Equal(t, http.StatusOK, c.inspectGet(t, addr, "affinitygroups/ins/g1", &g))
		require.Equal(t, "Allocated", g.State)
		require.Len(t, g.Pods, 2)
		names := []string{g.Pods[0].Name, g.Pods[1].Name}
		require.ElementsMatch(t, []string{ns + "/" + g1[0].Name, ns + "/" + g1[1].Name}, names)
		require.Len(t, g.Pods[0].LeafCellIndices, 8)
	})

	t.Run("why: a waiting pod's group, reason and holders", func(t *testing.T) {
		var e iv1.PodExplanation
		require.Equal(t, http.StatusOK, c.inspectGet(t, addr, "pods/ins/"+g2[0].Name, &e))
		t.Logf("summary: %s", e.Summary)
		require.NotNil(t, e.Group)
		require.Equal(t, "Pending", e.Group.State)
		require.NotEmpty(t, e.Group.Reason)
		require.Contains(t, e.Summary, "its affinity group is Pending: affinity group \"ins/g2\" (priority 0) needs 1 pod of 8 V100 in virtual cluster \"ins-a\"")
		require.Equal(t, []iv1.Holder{{Group: ns + "/g1", Priority: 0, LeafCells: 16, Preemptible: false}}, e.Holders)
		var running iv1.PodExplanation
		require.Equal(t, http.StatusOK, c.inspectGet(t, addr, "pods/ins/"+g1[0].Name, &running))
		require.Contains(t, running.Summary, "runs on node")
		var missing iv1.Error
		require.Equal(t, http.StatusNotFound, c.inspectGet(t, addr, "pods/ins/nope", &missing))
	})

	t.Run("metrics: cell gauges, decisions, beside the framework's", func(t *testing.T) {
		m := scrape(t)
		with := func(kv ...string) map[string]string {
			out := map[string]string{"scheduler": schedulerName}
			for i := 0; i+1 < len(kv); i += 2 {
				out[kv[i]] = kv[i+1]
			}
			return out
		}
		require.Equal(t, 32.0, m.value("hivesched_cluster_leaf_cells", with("leaf_cell_type", "V100", "state", "total")))
		require.Equal(t, 20.0, m.value("hivesched_cluster_leaf_cells", with("leaf_cell_type", "V100", "state", "used")))
		require.Equal(t, 4.0, m.value("hivesched_cluster_leaf_cells", with("leaf_cell_type", "V100", "state", "opportunistic")))
		require.Equal(t, 12.0, m.value("hivesched_cluster_leaf_cells", with("leaf_cell_type", "V100", "state", "free")))
		require.Equal(t, 16.0, m.value("hivesched_virtual_cluster_leaf_cells", with("virtual_cluster", "ins-a", "leaf_cell_type", "V100", "state", "used")))
		require.Equal(t, 0.0, m.value("hivesched_virtual_cluster_leaf_cells", with("virtual_cluster", "ins-a", "leaf_cell_type", "V100", "state", "free")))
		require.Equal(t, 8.0, m.value("hivesched_virtual_cluster_leaf_cells", with("virtual_cluster", "ins-b", "leaf_cell_type", "V100", "state", "free")))
		require.Equal(t, 4.0, m.value("hivesched_virtual_cluster_leaf_cells", with("virtual_cluster", "ins-b", "leaf_cell_type", "V100", "state", "opportunistic")))
		require.Equal(t, 1.0, m.value("hivesched_affinity_groups", with("virtual_cluster", "ins-a", "state", "Pending")))
		require.Equal(t, 1.0, m.value("hivesched_affinity_groups", with("virtual_cluster", "ins-a", "state", "Allocated")))
		require.Equal(t, 1.0, m.value("hivesched_affinity_groups", with("virtual_cluster", "ins-b", "state", "Allocated")))
		placed := m.value("hivesched_placement_duration_seconds", map[string]string{"result": "placed"}) -
			before.value("hivesched_placement_duration_seconds", map[string]string{"result": "placed"})
		require.Equal(t, 2.0, placed, "g1 and o1 were placed, each by one decision")
		require.GreaterOrEqual(t, m.value("hivesched_placement_duration_seconds", map[string]string{"result": "wait"}), 1.0)
		require.NotNil(t, m["scheduler_schedule_attempts_total"], "the framework's metrics are in the same registry")
		for name, f := range m {
			if !strings.HasPrefix(name, "hivesched_") {
				continue
			}
			for _, s := range f.Metric {
				for _, l := range s.Label {
					require.NotContains(t, []string{"pod", "group", "affinity_group", "node"}, l.GetName(), "bounded labels only: %s", name)
				}
			}
		}
	})

	t.Run("preemption and recovery counters", func(t *testing.T) {
		b := scrape(t)
		delta := func(m metricsScrape, name string, labels map[string]string) float64 {
			return m.value(name, labels) - b.value(name, labels)
		}
		g3 := gangPods(ns, "g3", "ins-a", 5, 1, 8)
		c.createPods(t, g3)
		c.waitBound(t, g3, 30*time.Second)
		c.waitGone(t, g1, 30*time.Second)
		c.waitBound(t, g2, 30*time.Second)
		m := scrape(t)
		require.Equal(t, 1.0, delta(m, "hivesched_preempted_affinity_groups_total", map[string]string{"virtual_cluster": "ins-a", "kind": "delete"}))
		require.Equal(t, 2.0, delta(m, "hivesched_preempted_pods_total", map[string]string{"virtual_cluster": "ins-a", "kind": "delete"}))
		require.Equal(t, 1.0, delta(m, "hivesched_placement_duration_seconds", map[string]string{"result": "preempt"}))

		s.stop()
		c.startScheduler(t, physical, withInspect(addr))
		require.Eventually(t, func() bool {
			var a iv1.VirtualCluster
			return c.inspectGet(t, addr, "virtualclusters/ins-a", &a) == http.StatusOK && a.LeafCells.Used == 16
		}, 30*time.Second, 200*time.Millisecond, "the restarted scheduler serves the recovered state")
		m = scrape(t)
		require.Equal(t, 3.0, delta(m, "hivesched_recovered_affinity_groups_total", map[string]string{"result": "recovered"}), "g2, g3 and o1")
		require.Equal(t, 0.0, delta(m, "hivesched_recovered_affinity_groups_total", map[string]string{"result": "refused"}))
		require.Equal(t, 1.0, delta(m, "hivesched_recovery_duration_seconds", nil))
		require.Equal(t, 16.0, m.value("hivesched_virtual_cluster_leaf_cells", map[string]string{"scheduler": schedulerName, "virtual_cluster": "ins-a", "state": "used"}))
	})
}
