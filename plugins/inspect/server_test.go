package inspect

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hivesched/hivesched/apis/config"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/cellspec"
	"github.com/hivesched/hivesched/plugins/groupindex"
	"github.com/hivesched/hivesched/plugins/inspect/dashboard"
	"github.com/hivesched/hivesched/plugins/virtualclusters"
)

// Issue 28, item 6: at most MaxInFlight requests are served at once; one
// more waits its turn, then is told to retry. Requests without credentials
// are refused without taking a turn.
func TestConcurrencyCap(t *testing.T) {
	p := testServer(t, 8)
	p.queueWait = 50 * time.Millisecond
	h := p.Handler()
	for i := 0; i < MaxInFlight; i++ {
		p.inFlight <- struct{}{} // every turn taken
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, asUser(httptest.NewRequest(http.MethodGet, iv1.PathPrefix+"virtualclusters", nil), "admin"))
	require.Equal(t, http.StatusServiceUnavailable, rec.Code)
	require.Equal(t, "1", rec.Header().Get("Retry-After"))
	require.Contains(t, rec.Body.String(), "busy")
	require.Equal(t, http.StatusUnauthorized, get(t, h, "", iv1.PathPrefix+"cells", nil), "no credentials: refused at once")
	<-p.inFlight // one turn free again
	require.Equal(t, http.StatusOK, get(t, h, "admin", iv1.PathPrefix+"virtualclusters", nil))
}

// The server's connections have read, write and idle timeouts and a header
// size bound.
func TestServerTimeouts(t *testing.T) {
	srv := testServer(t, 8).httpServer(t.Context())
	require.Equal(t, ReadHeaderTimeout, srv.ReadHeaderTimeout)
	require.NotZero(t, srv.ReadTimeout)
	require.NotZero(t, srv.WriteTimeout)
	require.NotZero(t, srv.IdleTimeout)
	require.Equal(t, MaxHeaderBytes, srv.MaxHeaderBytes)
}

// The tree cache: callers at the same time share one build; a later one
// after the TTL builds anew.
func TestTreeCache(t *testing.T) {
	c := newTTLCache()
	var builds atomic.Int32
	release := make(chan struct{})
	build := func() any {
		builds.Add(1)
		<-release
		return "tree"
	}
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.Equal(t, "tree", c.get("cells", time.Hour, build))
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	require.Equal(t, int32(1), builds.Load())
	require.Equal(t, "tree", c.get("cells", time.Hour, build))
	require.Equal(t, int32(1), builds.Load(), "within the TTL: the same answer")
	require.Equal(t, "tree", c.get("cells", 0, build))
	require.Equal(t, int32(2), builds.Load(), "after it: built anew")
}

// The cell map: every leaf once, as the tree shows it, in switch groups,
// coloured by the VC of the group using it.
func TestCellMap(t *testing.T) {
	p := testServer(t, 16)
	require.NoError(t, p.core.SetNodeHealth("r1-n7", cellcore.NodeBad))
	m := p.cellMap()
	require.Equal(t, []string{"a", "b"}, m.VirtualClusters)
	require.Len(t, m.Chains, 1)
	ch := m.Chains[0]
	require.Len(t, ch.Cells, 2, "two racks")
	require.Equal(t, "V100-RACK/rack1", ch.Cells[1].ID)
	require.Len(t, ch.Nodes, 16)
	counts := map[rune]int{}
	for _, n := range ch.Nodes {
		require.Len(t, n.Leaves, 8+4, "8 leaves, a space between switches, two between sockets: %q", n.Leaves)
		require.Equal(t, "   ", strings.Map(func(r rune) rune {
			if r == ' ' {
				return r
			}
			return -1
		}, n.Leaves[2:3]+n.Leaves[5:7]))
		require.Len(t, n.Owners, 8)
		require.Equal(t, []int32{0, 1, 2, 3, 4, 5, 6, 7}, n.Indices)
		for _, c := range n.Leaves {
			counts[c]++
		}
		k := 0
		for _, c := range strings.ReplaceAll(n.Leaves, " ", "") {
			switch c {
			case 'U', '.':
				require.Equal(t, n.VC, n.Owners[k], "a guaranteed group's leaf has its node's VC")
			case 'o':
				require.Equal(t, 0, n.Owners[k], "the opportunistic groups are VC a's")
			}
			k++
		}
	}
	require.Equal(t, 32, counts['U'])
	require.Equal(t, 8, counts['o'])
	require.Equal(t, 8, counts['X'], "the bad node")
	require.Equal(t, 128, counts['U']+counts['o']+counts['X']+counts['.']+counts['_'])
	var bad iv1.MapNode
	for _, n := range ch.Nodes {
		if n.Name == "r1-n7" {
			bad = n
		}
	}
	require.Equal(t, "bad", bad.Health)

	// Served with an ETag: the same map again is 304.
	h := p.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, asUser(httptest.NewRequest(http.MethodGet, iv1.PathPrefix+"cellmap", nil), "admin"))
	require.Equal(t, http.StatusOK, rec.Code)
	tag := rec.Header().Get("ETag")
	require.NotEmpty(t, tag)
	time.Sleep(TreeCacheTTL + 10*time.Millisecond) // built anew, same content
	rec = httptest.NewRecorder()
	req := asUser(httptest.NewRequest(http.MethodGet, iv1.PathPrefix+"cellmap", nil), "admin")
	req.Header.Set("If-None-Match", tag)
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusNotModified, rec.Code)
}

// The history keeps a bounded ring, oldest first, and forgets a VC absent
// for a whole window.
func TestHistoryRing(t *testing.T) {
	h := newHistory(4)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 6; i++ {
		counts := map[string]iv1.LeafCounts{"a": {Total: 8, Used: int32(i)}}
		if i == 5 {
			counts["b"] = iv1.LeafCounts{Total: 4}
		}
		h.add(t0.Add(time.Duration(i)*time.Minute), counts)
	}
	s := h.snapshot(time.Minute)
	require.Equal(t, 60, s.IntervalSeconds)
	require.Len(t, s.Times, 4)
	require.Equal(t, t0.Add(2*time.Minute), s.Times[0])
	require.Equal(t, []int32{2, 3, 4, 5}, []int32{s.VirtualClusters["a"][0].Used, s.VirtualClusters["a"][1].Used, s.VirtualClusters["a"][2].Used, s.VirtualClusters["a"][3].Used})
	require.Equal(t, []iv1.LeafCounts{{}, {}, {}, {Total: 4}}, s.VirtualClusters["b"], "zeros before it existed")
	for i := 0; i < 4; i++ {
		h.add(t0, map[string]iv1.LeafCounts{"a": {Total: 8}})
	}
	require.NotContains(t, h.snapshot(time.Minute).VirtualClusters, "b", "gone for a whole window")
}

// The event log keeps the kinds asked for, newest first, one entry for a
// gang's pods, and a bounded number of entries.
func TestEventLog(t *testing.T) {
	l := NewEventLog()
	l.Note(podIn("ns", "x-0"), "Warning", "BindFailed", "not kept")
	for i := 0; i < 3; i++ {
		l.Note(podIn("ns", "v-"+string(rune('0'+i))), "Normal", "Preempted", "preempted by affinity group ns/p (whole group ns/v is deleted)")
	}
	l.Note(podIn("ns", "w-0"), "Normal", "LazilyPreempted", "lazily")
	got := l.list(func(string) bool { return true })
	require.Len(t, got, 2)
	require.Equal(t, "LazilyPreempted", got[0].Reason)
	require.Equal(t, "Preempted", got[1].Reason)
	require.Equal(t, int32(3), got[1].Count)
	require.Equal(t, "ns/v-0", got[1].Object)
	for i := 0; i < 2*EventLogSize; i++ {
		l.Note(podIn("ns", "p"), "Warning", "PendingTimeout", "timed out "+string(rune(i)))
	}
	got = l.list(func(string) bool { return true })
	require.Len(t, got, EventLogSize)
	require.Equal(t, "timed out "+string(rune(2*EventLogSize-1)), got[0].Message)
	require.Empty(t, l.list(func(ns string) bool { return ns != "ns" }))
	var nilLog *EventLog
	nilLog.Note(podIn("ns", "p"), "Normal", "Preempted", "nothing happens")
}

// The dashboard is served beside the API with the same rules, with a
// content security policy that allows its own files only.
func TestDashboardServed(t *testing.T) {
	h := testServer(t, 8).Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, asUser(httptest.NewRequest(http.MethodGet, iv1.DashboardPath, nil), "admin"))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
	require.Equal(t, dashboard.ContentSecurityPolicy, rec.Header().Get("Content-Security-Policy"))
	body := rec.Body.String()
	require.Contains(t, body, `<script src="app.js?v=`)
	require.NotRegexp(t, `(src|href)="(https?:)?//`, body, "nothing from elsewhere")
	for _, asset := range []string{"app.js", "app.css"} {
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, asUser(httptest.NewRequest(http.MethodGet, iv1.DashboardPath+asset, nil), "admin"))
		require.Equal(t, http.StatusOK, rec.Code, asset)
		require.NotRegexp(t, `https?://|url\(\s*['"]?//|@import`, rec.Body.String(), "%s loads nothing from the internet", asset)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, asUser(httptest.NewRequest(http.MethodGet, "/", nil), "admin"))
	require.Equal(t, http.StatusFound, rec.Code)
	require.Equal(t, "dashboard/", rec.Header().Get("Location"), "relative: it works behind the API server's proxy")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, asUser(httptest.NewRequest(http.MethodGet, iv1.DashboardPath+"nope.js", nil), "admin"))
	require.Equal(t, http.StatusNotFound, rec.Code)
}

// Issue 27: the numbers add up. A VC whose free GPU another VC's
// opportunistic job uses shows it as Lent, and one on bad hardware as
// Unavailable: Total = Used + Free + Lent + Unavailable, in the API and in
// the VirtualCluster status the same way (virtualclusters.LeafBreakdown).
func TestVCCountsAddUp(t *testing.T) {
	pc := config.PhysicalClusterSpec{CellTypes: map[string]config.CellTypeSpec{
		"V100-NODE": {ChildCellType: "V100", ChildCellNumber: 8, IsNodeLevel: true},
	}, PhysicalCells: []config.PhysicalCellSpec{{CellType: "V100-NODE", CellAddress: "n0"}, {CellType: "V100-NODE", CellAddress: "n1"}}}
	k, err := cellcore.New(cellspec.Config(pc))
	require.NoError(t, err)
	require.NoError(t, k.SetNodeHealth("n0", cellcore.NodeHealthy))
	require.NoError(t, k.SetNodeHealth("n1", cellcore.NodeHealthy))
	vcs := virtualclusters.New(virtualclusters.Config{Core: k})
	for _, vc := range []string{"x", "y"} {
		_, _, err := vcs.Apply(&hv1.VirtualCluster{ObjectMeta: metav1.ObjectMeta{Name: vc},
			Spec: hv1.VirtualClusterSpec{VirtualCells: []hv1.VirtualCellSpec{{CellType: "V100-NODE", CellNumber: 1}}}})
		require.NoError(t, err)
	}
	p := New(Config{Core: k, Groups: groupindex.New("nvidia.com/gpu"), VirtualClusters: vcs, Access: testAccess()})
	one := func(name, vc string, prio, gpus int32) cellcore.AffinityGroupSpec {
		return cellcore.AffinityGroupSpec{Name: name, VirtualCluster: vc, Priority: prio, Members: []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: gpus}}}
	}
	place(t, k, one("ns/x7", "x", 0, 7))
	place(t, k, one("ns/y8", "y", 0, 8))
	place(t, k, one("ns/yopp", "y", cellcore.OpportunisticPriority, 1)) // the one free GPU: x's
	x := p.virtualClusters("x")[0].LeafCells
	require.Equal(t, iv1.LeafCounts{Total: 8, Used: 7, Free: 0, Lent: 1}, x, "the issue's TOTAL 28 USED 27 FREE 0, with the missing GPU named")
	y := p.virtualClusters("y")[0].LeafCells
	require.Equal(t, iv1.LeafCounts{Total: 8, Used: 8, Opportunistic: 1}, y, "its opportunistic GPU is outside its total")

	_, err = k.DeleteAffinityGroup("ns/yopp")
	require.NoError(t, err)
	var free int32 = -1
	for _, n := range p.cellMap().Chains[0].Nodes {
		if n.Name == "n0" {
			free = n.Indices[strings.IndexAny(strings.ReplaceAll(n.Leaves, " ", ""), "._")]
		}
	}
	require.NoError(t, k.SetLeafCellHealth("n0", "V100", free, true))
	x = p.virtualClusters("x")[0].LeafCells
	require.Equal(t, iv1.LeafCounts{Total: 8, Used: 7, Unavailable: 1, Lost: 1}, x)
	for _, c := range []iv1.LeafCounts{x, y, p.leafCounts()["x"], p.leafCounts()["y"]} {
		require.Equal(t, c.Total, c.Used+c.Free+c.Lent+c.Unavailable)
	}
}
