package inspect

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
	"github.com/hivesched/hivesched/plugins/cellcore"
)

// viewer polls like the dashboard's page does (app.js): every interval the
// VCs, the groups, the events and the cell map (conditional, with the
// ETag it got), and the history every 30 s; until stop is closed.
func pollLikeThePage(h http.Handler, interval time.Duration, stop <-chan struct{}, requests *atomic.Int64) {
	etags := map[string]string{}
	lastHistory := time.Time{}
	do := func(path string, hdr map[string]string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := asUser(httptest.NewRequest(http.MethodGet, path, nil), "admin")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		h.ServeHTTP(rec, req)
		requests.Add(1)
		return rec
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, path := range []string{"virtualclusters", "affinitygroups?all=true", "cellmap"} {
			if rec := do(iv1.PathPrefix+path, map[string]string{"If-None-Match": etags[path]}); rec.Code == http.StatusOK {
				etags[path] = rec.Header().Get("ETag")
			}
		}
		do(iv1.PathPrefix+"events", nil)
		if time.Since(lastHistory) > 30*time.Second {
			do(iv1.PathPrefix+"history", nil)
			lastHistory = time.Now()
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// schedule places and deletes gangs in a loop (the core's lock-holding
// work: a decision, then a deletion) until stop, counting both.
func schedule(k *cellcore.Core, stop <-chan struct{}, ops *atomic.Int64) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		name := fmt.Sprintf("bench/g-%d", i)
		d, err := k.Schedule(cellcore.AffinityGroupSpec{Name: name, VirtualCluster: "b", Priority: 0,
			Members: []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: 8}}})
		if err != nil || d.Kind != cellcore.Placed {
			panic(fmt.Sprintf("%v %v", err, d.Reason))
		}
		if _, err := k.DeleteAffinityGroup(name); err != nil {
			panic(err)
		}
		ops.Add(2)
	}
}

// TestDashboardCost (issue 27: the page costs the scheduler little) is the
// measurement docs/dashboard.md reports, run on demand:
//
//	HIVESCHED_DASHBOARD_COST=1 go test -run TestDashboardCost -v ./plugins/inspect/
//
// In one run, alternately with the page closed and open, it counts the cell
// core's scheduling operations (a gang placed, then deleted: the core's
// lock is what the page's requests share with scheduling) while viewers
// poll the inspect server's handler as the page does, and reports the
// ratio open/closed per scenario: one page at the page's cadence (5 s), and
// ten pages polling every second (the tree is built once per second
// whatever their number).
func TestDashboardCost(t *testing.T) {
	if os.Getenv("HIVESCHED_DASHBOARD_COST") == "" {
		t.Skip("set HIVESCHED_DASHBOARD_COST=1 to measure (about 4 minutes)")
	}
	window := 5 * time.Second
	if s, err := strconv.Atoi(os.Getenv("HIVESCHED_DASHBOARD_COST_WINDOW")); err == nil {
		window = time.Duration(s) * time.Second
	}
	const rounds = 4
	for _, nodes := range []int{1000, 10000} {
		p := testServer(t, nodes)
		h := p.Handler()
		for _, sc := range []struct {
			name     string
			viewers  int
			interval time.Duration
		}{{"one page, every 5 s", 1, 5 * time.Second}, {"ten pages, every 1 s", 10, time.Second}} {
			var closed, open, requests int64
			for r := 0; r < 2*rounds; r++ {
				pageOpen := r%2 == 1
				stop := make(chan struct{})
				var ops, reqs atomic.Int64
				var wg sync.WaitGroup
				if pageOpen {
					for v := 0; v < sc.viewers; v++ {
						wg.Add(1)
						go func() { defer wg.Done(); pollLikeThePage(h, sc.interval, stop, &reqs) }()
					}
				}
				wg.Add(1)
				go func() { defer wg.Done(); schedule(p.core, stop, &ops) }()
				time.Sleep(window)
				close(stop)
				wg.Wait()
				if pageOpen {
					open += ops.Load()
					requests += reqs.Load()
				} else {
					closed += ops.Load()
				}
			}
			secs := float64(rounds) * window.Seconds()
			ratio := float64(open) / float64(closed)
			t.Logf("nodes=%d %s: %.0f ops/s closed, %.0f ops/s open (%d requests), ratio %.3f",
				nodes, sc.name, float64(closed)/secs, float64(open)/secs, requests, ratio)
			if sc.viewers == 1 {
				require.GreaterOrEqual(t, ratio, 0.95, "the page costs the scheduler at most 5%%")
			}
		}
	}
}
