package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/hivesched/hivesched/apis/config"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/cmd/kubectl-hivesched/cli"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/cellspec"
	"github.com/hivesched/hivesched/plugins/groupindex"
	"github.com/hivesched/hivesched/plugins/inspect"
	"github.com/hivesched/hivesched/plugins/virtualclusters"
	"github.com/hivesched/hivesched/test/util/cdp"
)

// The browser tests run a real headless Chromium (make browser-test sets
// HIVESCHED_CHROMIUM=/usr/bin/chromium); without it they skip.
func chromium(t *testing.T) string {
	path := os.Getenv("HIVESCHED_CHROMIUM")
	if path == "" {
		t.Skip("set HIVESCHED_CHROMIUM to a Chromium binary to run the dashboard in a browser (make browser-test)")
	}
	return path
}

// screenshots go to _output/dashboard, for a person to look at.
func screenshotDir(t *testing.T) string {
	dir := filepath.Join(repoRoot(t), "_output", "dashboard")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// syncBuffer is a bytes.Buffer written by one goroutine, read by another.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var dashboardURL = regexp.MustCompile(`Open (http://127\.0\.0\.1:\d+/\?token=[0-9a-f]+)`)

// serveDashboard runs `kubectl hivesched dashboard ARGS --port 0` until the
// test ends and returns the URL it printed.
func serveDashboard(t *testing.T, args ...string) string {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	cmd := cli.NewCommand(&out, &errOut)
	cmd.SetArgs(append([]string{"dashboard", "--port", "0"}, args...))
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err, "kubectl hivesched dashboard: %s", errOut.String())
		case <-time.After(10 * time.Second):
			t.Error("kubectl hivesched dashboard did not stop")
		}
	})
	var url string
	require.Eventually(t, func() bool {
		m := dashboardURL.FindStringSubmatch(out.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	}, 30*time.Second, 50*time.Millisecond, "kubectl hivesched dashboard printed no URL: %s %s", out.String(), errOut.String())
	return url
}

func openBrowser(t *testing.T, width, height int) *cdp.Page {
	ctx := t.Context()
	var log syncBuffer
	b, err := cdp.Launch(ctx, chromium(t), t.TempDir(), &log)
	require.NoError(t, err)
	t.Cleanup(b.Close)
	p, err := b.NewPage(ctx, width, height)
	require.NoError(t, err)
	return p
}

func evalString(t *testing.T, p *cdp.Page, expr string) string {
	t.Helper()
	var s string
	require.NoError(t, p.Eval(t.Context(), expr, &s))
	return s
}

func evalInt(t *testing.T, p *cdp.Page, expr string) int {
	t.Helper()
	var n int
	require.NoError(t, p.Eval(t.Context(), expr, &n))
	return n
}

func shoot(t *testing.T, p *cdp.Page, name string, full bool) {
	t.Helper()
	file := filepath.Join(screenshotDir(t), name)
	require.NoError(t, p.Screenshot(t.Context(), file, full))
	t.Logf("screenshot: %s", file)
}

// TestDashboardBrowser (issue 27): the dashboard in a real headless
// Chromium, served by `kubectl hivesched dashboard` from a scheduler on a
// real API server: it loads without a script error or a CSP violation,
// shows the known state (every GPU, a gang's GPUs highlighted, a waiting
// group's reason, VC numbers that add up, a preemption), is used with the
// keyboard, updates after a change without a reload, and writes
// screenshots under _output/dashboard.
func TestDashboardBrowser(t *testing.T) {
	chromium(t)
	c := startCluster(t)
	c.createNodes(t, "dsh", 2, 2, 1)
	c.createNamespace(t, "team-a")
	c.createNamespace(t, "team-b")
	c.createVC(t, "vc-train", []string{"team-a"}, "V100-NODE", 2)
	c.createVC(t, "vc-speech", []string{"team-b"}, "V100-NODE", 1)
	addr := freeAddr(t)
	c.startScheduler(t, physicalCluster("dsh", 2, 2, 1), withInspect(addr))

	train := gangPods("team-a", "train", "vc-train", 0, 2, 8)
	c.createPods(t, train)
	c.waitBound(t, train, 30*time.Second)
	low := gangPods("team-b", "low", "vc-speech", 1, 1, 8)
	c.createPods(t, low)
	c.waitBound(t, low, 30*time.Second)
	high := gangPods("team-b", "high", "vc-speech", 5, 1, 8)
	c.createPods(t, high)
	c.waitBound(t, high, 30*time.Second) // after preempting low
	sweep := gangPods("team-b", "sweep", "vc-speech", -1, 1, 4)
	c.createPods(t, sweep)
	c.waitBound(t, sweep, 30*time.Second)
	big := gangPods("team-a", "big", "vc-train", 0, 1, 8)
	c.createPods(t, big)
	c.failedScheduling(t, big[0], "team-a/big", 30*time.Second)

	url := serveDashboard(t, "--inspect-url", "http://"+addr, "--kubeconfig", c.kubeconfig)
	p := openBrowser(t, 1400, 900)
	ctx := t.Context()
	start := time.Now()
	require.NoError(t, p.Navigate(ctx, url))
	require.NoError(t, p.WaitFor(ctx, `document.body.dataset.ready === 'true'`, 30*time.Second))
	t.Logf("the page was ready %v after navigating", time.Since(start))
	require.Equal(t, "hivesched dashboard", evalString(t, p, "document.title"))
	require.True(t, strings.HasSuffix(evalString(t, p, "location.pathname"), "/dashboard/"), "the token was traded for a cookie and dropped from the URL")

	t.Run("cells: every GPU, coloured and named", func(t *testing.T) {
		require.Equal(t, 4*8+4, evalInt(t, p, `document.querySelectorAll('#tree rect.leaf').length`))
		require.Equal(t, 16+8, evalInt(t, p, `document.querySelectorAll('#tree rect.leaf[data-code="U"]').length`), "train's and high's")
		require.Equal(t, 4, evalInt(t, p, `document.querySelectorAll('#tree rect.leaf[data-code="o"]').length`), "sweep's, opportunistic")
		require.Zero(t, evalInt(t, p, `[...document.querySelectorAll('#tree rect.leaf')].filter(r => !r.querySelector('title') || !r.querySelector('title').textContent).length`),
			"every GPU has a text alternative")
		require.Contains(t, evalString(t, p, `document.querySelector('#tree rect.leaf[data-code="o"] title').textContent`), "opportunistic group (vc-speech)")
		require.Contains(t, evalString(t, p, `document.getElementById('summary').textContent`), "36 GPUs on 5 nodes")
		require.Contains(t, evalString(t, p, `document.getElementById('summary').textContent`), "1 group waiting", "big waits; one, not \"1 groups\"")
		require.Contains(t, evalString(t, p, `document.getElementById('legend').textContent`), "vc-train")
		shoot(t, p, "dashboard-cells.png", false)
	})

	t.Run("filter by VC, zoom", func(t *testing.T) {
		// vc-speech's GPUs stay lit; every other VC's GPU is dimmed.
		require.NoError(t, p.Eval(ctx, `(() => { const s = document.getElementById('vcFilter'); s.value = 'vc-speech'; s.dispatchEvent(new Event('change')); })()`, nil))
		lit := `[...document.querySelectorAll('#tree rect.leaf:not(.dim)')]`
		require.Equal(t, 8+4, evalInt(t, p, lit+`.filter(r => r.dataset.code === 'U' || r.dataset.code === 'o').length`), "high's 8 and sweep's 4 (opportunistic, lent by vc-speech's cells or free ones)")
		require.Zero(t, evalInt(t, p, lit+`.filter(r => (r.querySelector('title') || {}).textContent.includes('vc-train')).length`), "no vc-train GPU is lit")
		require.Equal(t, 16, evalInt(t, p, `[...document.querySelectorAll('#tree rect.leaf.dim')].filter(r => r.dataset.code === 'U').length`), "train's 16 are dimmed")
		require.NoError(t, p.Eval(ctx, `(() => { const s = document.getElementById('vcFilter'); s.value = ''; s.dispatchEvent(new Event('change')); })()`, nil))
		require.Zero(t, evalInt(t, p, `document.querySelectorAll('#tree rect.leaf.dim').length`))
		// Zoom in doubles nothing but the drawing's size; reset fits it again.
		before := evalInt(t, p, `Number(document.getElementById('tree').getAttribute('width'))`)
		require.NoError(t, p.Eval(ctx, `document.getElementById('zoomIn').click()`, nil))
		after := evalInt(t, p, `Number(document.getElementById('tree').getAttribute('width'))`)
		require.InDelta(t, float64(before)*1.25, float64(after), 2, "zoom in: 125%")
		require.NoError(t, p.Eval(ctx, `document.getElementById('zoomReset').click()`, nil))
		require.Equal(t, before, evalInt(t, p, `Number(document.getElementById('tree').getAttribute('width'))`))
	})

	t.Run("keyboard: tabs, racks, a node's GPUs", func(t *testing.T) {
		require.NoError(t, p.Eval(ctx, `document.getElementById('tab-cells').focus()`, nil))
		require.NoError(t, p.Key(ctx, "ArrowRight"))
		require.Equal(t, "tab-vcs", evalString(t, p, `document.activeElement.id`))
		require.Equal(t, "true", evalString(t, p, `document.getElementById('tab-vcs').getAttribute('aria-selected')`))
		require.NoError(t, p.Key(ctx, "ArrowLeft"))
		require.Equal(t, "tab-cells", evalString(t, p, `document.activeElement.id`))
		require.NoError(t, p.Eval(ctx, `[...document.querySelectorAll('#tree g.rack')].find(r => r.getAttribute('aria-label').includes('rack0')).focus()`, nil))
		require.NoError(t, p.Key(ctx, "ArrowDown"))
		require.Equal(t, "dsh-r0-n0", evalString(t, p, `document.activeElement.dataset.node`))
		require.NoError(t, p.Key(ctx, "ArrowRight"))
		require.Equal(t, "dsh-r0-n1", evalString(t, p, `document.activeElement.dataset.node`))
		require.NoError(t, p.Key(ctx, "Enter"))
		require.NoError(t, p.WaitFor(ctx, `document.querySelectorAll('#nodeDetail tbody tr').length === 8`, 10*time.Second))
		require.Contains(t, evalString(t, p, `document.getElementById('nodeDetail').textContent`), "Node dsh-r0-n1")
	})

	t.Run("groups: the waiting group's reason, sorted, a gang highlighted", func(t *testing.T) {
		require.NoError(t, p.Eval(ctx, `window.hivesched.selectTab('groups')`, nil))
		row := `document.querySelector('#groupTable tr[data-group="team-a/big"]')`
		require.NoError(t, p.WaitFor(ctx, row+` !== null`, 10*time.Second))
		text := evalString(t, p, row+`.textContent`)
		require.Contains(t, text, "Pending")
		require.Contains(t, text, `affinity group "team-a/big" (priority 0) needs 1 pod of 8 V100 in virtual cluster "vc-train"`, "the one sentence")
		require.Contains(t, evalString(t, p, `document.querySelector('#groupTable tr[data-group="team-a/train"]').textContent`), "2/2")
		// Sort by priority, descending: high (5) first.
		require.NoError(t, p.Eval(ctx, `document.querySelector('#groupTable button[data-sort="priority"]').click()`, nil))
		require.NoError(t, p.Eval(ctx, `document.querySelector('#groupTable button[data-sort="priority"]').click()`, nil))
		require.Equal(t, "team-b/high", evalString(t, p, `document.querySelector('#groupTable tbody tr').dataset.group`))
		require.Equal(t, "descending", evalString(t, p, `document.querySelector('#groupTable th[aria-sort]:not([aria-sort="none"])').getAttribute('aria-sort')`))
		shoot(t, p, "dashboard-groups.png", false)
		// Show train's placement on the tree.
		require.NoError(t, p.Eval(ctx, `document.querySelector('#groupTable button[data-show="team-a/train"]').click()`, nil))
		require.Equal(t, "cells", evalString(t, p, `window.hivesched.state.tab`))
		require.Equal(t, 16, evalInt(t, p, `document.querySelectorAll('#tree rect.leaf.hl').length`))
		require.Zero(t, evalInt(t, p, `document.querySelectorAll('#tree rect.leaf.hl:not([data-code="U"])').length`))
		require.Contains(t, evalString(t, p, `document.getElementById('highlightText').textContent`), "16 GPUs on 2 nodes")
		shoot(t, p, "dashboard-highlight.png", false)
		// The README's picture (docs/img/dashboard.png is a copy of it).
		require.NoError(t, p.SetViewport(ctx, 1040, 600))
		require.NoError(t, p.Eval(ctx, `document.getElementById('zoomReset').click()`, nil))
		shoot(t, p, "dashboard-readme.png", false)
		require.NoError(t, p.SetViewport(ctx, 1400, 900))
	})

	t.Run("virtual clusters: numbers that add up, the last hour", func(t *testing.T) {
		require.NoError(t, p.Eval(ctx, `window.hivesched.selectTab('vcs')`, nil))
		row := `document.querySelector('#vcTable tr[data-vc="vc-train"]').textContent`
		require.Contains(t, evalString(t, p, row), "adds up")
		require.Zero(t, evalInt(t, p, `[...document.querySelectorAll('#vcTable td.bad')].length`))
		require.NoError(t, p.WaitFor(ctx, `document.querySelectorAll('#vcCharts figure svg[role="img"]').length === 2`, 35*time.Second))
		require.Contains(t, evalString(t, p, `[...document.querySelectorAll('#vcCharts figure')].find(f => f.querySelector('h3').textContent === 'vc-train').querySelector('svg').getAttribute('aria-label')`),
			"now 16 used")
		shoot(t, p, "dashboard-vcs.png", true)
	})

	t.Run("preemptions", func(t *testing.T) {
		require.NoError(t, p.Eval(ctx, `window.hivesched.selectTab('events')`, nil))
		text := evalString(t, p, `document.getElementById('eventTable').textContent`)
		require.Contains(t, text, "Preempted")
		require.Contains(t, text, "preempted by affinity group team-b/high")
		shoot(t, p, "dashboard-events.png", false)
	})

	t.Run("live: a change shows without a reload", func(t *testing.T) {
		require.NoError(t, p.Eval(ctx, `window.hivesched.selectTab('cells'); window.__sameDocument = true`, nil))
		c.deletePods(t, train)
		c.waitBound(t, big, 30*time.Second)
		require.NoError(t, p.WaitFor(ctx, `document.querySelectorAll('#tree rect.leaf.hl').length === 0`, 20*time.Second), "train is gone from the tree")
		require.NoError(t, p.Eval(ctx, `document.getElementById('clearHighlight').click()`, nil))
		require.NoError(t, p.WaitFor(ctx, `(window.hivesched.state.groups.find(g => g.name === 'team-a/big') || {}).state === 'Allocated'`, 20*time.Second))
		require.NoError(t, p.Eval(ctx, `window.hivesched.selectTab('groups')`, nil))
		require.Contains(t, evalString(t, p, `document.querySelector('#groupTable tr[data-group="team-a/big"]').textContent`), "Allocated")
		require.Equal(t, "true", evalString(t, p, `String(window.__sameDocument)`), "no reload")
		require.NoError(t, p.Eval(ctx, `window.hivesched.selectTab('cells')`, nil))
		shoot(t, p, "dashboard-after.png", false)
	})

	require.Empty(t, p.Errors(), "the page logged no error (scripts, CSP, loads)")
}

// TestDashboardBrowserTenThousandNodes (issue 27): at 10,000 nodes (80,000
// GPUs) the page draws each node as one tile, in racks, and a rack's GPUs
// on demand (Enter on it); a node filter narrows it. The state is a core
// of the size served by an inspect server in this process (no scheduler:
// nothing but the API's answers matters to the page).
func TestDashboardBrowserTenThousandNodes(t *testing.T) {
	chromium(t)
	const racks, perRack = 250, 40
	pc := config.PhysicalClusterSpec{CellTypes: map[string]config.CellTypeSpec{
		"V100-SWITCH": {ChildCellType: "V100", ChildCellNumber: 2},
		"V100-SOCKET": {ChildCellType: "V100-SWITCH", ChildCellNumber: 2},
		"V100-NODE":   {ChildCellType: "V100-SOCKET", ChildCellNumber: 2, IsNodeLevel: true},
		"V100-RACK":   {ChildCellType: "V100-NODE", ChildCellNumber: perRack},
	}}
	for r := 0; r < racks; r++ {
		rack := config.PhysicalCellSpec{CellType: "V100-RACK", CellAddress: fmt.Sprintf("rack%d", r)}
		for n := 0; n < perRack; n++ {
			rack.CellChildren = append(rack.CellChildren, config.PhysicalCellSpec{CellAddress: fmt.Sprintf("r%d-n%d", r, n)})
		}
		pc.PhysicalCells = append(pc.PhysicalCells, rack)
	}
	k, err := cellcore.New(cellspec.Config(pc))
	require.NoError(t, err)
	for r := 0; r < racks; r++ {
		for n := 0; n < perRack; n++ {
			require.NoError(t, k.SetNodeHealth(fmt.Sprintf("r%d-n%d", r, n), cellcore.NodeHealthy))
		}
	}
	vcs := virtualclusters.New(virtualclusters.Config{Core: k})
	names := []string{"vision", "speech", "nlp", "rl", "infra", "research"}
	for _, vc := range names {
		_, _, err := vcs.Apply(&hv1.VirtualCluster{ObjectMeta: metav1.ObjectMeta{Name: vc},
			Spec: hv1.VirtualClusterSpec{VirtualCells: []hv1.VirtualCellSpec{{CellType: "V100-NODE", CellNumber: racks * perRack / 8}}}})
		require.NoError(t, err)
	}
	for i := 0; i < racks*perRack/2; i++ {
		vc := names[i%len(names)]
		d, err := k.Schedule(cellcore.AffinityGroupSpec{Name: fmt.Sprintf("ns/%s-%d", vc, i), VirtualCluster: vc,
			Members: []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: int32(8 >> (i % 3))}}})
		require.NoError(t, err)
		if d.Kind != cellcore.Placed {
			break
		}
	}
	srv := inspect.New(inspect.Config{Core: k, Groups: groupindex.New("nvidia.com/gpu"), VirtualClusters: vcs, Access: inspect.Access{
		Authenticator: authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
			return &authenticator.Response{User: &user.DefaultInfo{Name: "admin"}}, r.Header.Get("Authorization") == "Bearer admin", nil
		}),
		Authorizer: authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
			return authorizer.DecisionAllow, "", nil
		}),
	}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, err = srv.Start(ctx, addr)
	require.NoError(t, err)

	url := serveDashboard(t, "--inspect-url", "http://"+addr, "--token", "admin")
	p := openBrowser(t, 1400, 900)
	start := time.Now()
	require.NoError(t, p.Navigate(ctx, url))
	require.NoError(t, p.WaitFor(ctx, `document.body.dataset.ready === 'true'`, 60*time.Second))
	t.Logf("10,000 nodes: the page was ready %v after navigating", time.Since(start))
	require.Equal(t, racks*perRack, evalInt(t, p, `document.querySelectorAll('#tree g.node').length`))
	require.Zero(t, evalInt(t, p, `document.querySelectorAll('#tree rect.leaf').length`), "aggregated: no GPU drawn one by one")
	require.Less(t, evalInt(t, p, `document.querySelectorAll('#tree *').length`), 60000, "a bounded number of elements")
	require.Contains(t, evalString(t, p, `document.querySelector('#tree g.node title').textContent`), "8 GPUs")
	shoot(t, p, "dashboard-10k.png", false)

	// A rack's GPUs on demand.
	require.NoError(t, p.Eval(ctx, `document.querySelector('#tree g.rack').focus()`, nil))
	t0 := time.Now()
	require.NoError(t, p.Key(ctx, "Enter"))
	require.NoError(t, p.WaitFor(ctx, `document.querySelectorAll('#tree rect.leaf').length === 320`, 20*time.Second))
	t.Logf("10,000 nodes: a rack expanded in %v", time.Since(t0))
	require.Equal(t, "true", evalString(t, p, `document.querySelector('#tree g.rack').getAttribute('aria-expanded')`))
	// A node filter expands the racks of the nodes it matches.
	require.NoError(t, p.Eval(ctx, `(() => { const f = document.getElementById('nodeFilter'); f.value = 'r249-n39'; f.dispatchEvent(new Event('input')); })()`, nil))
	require.NoError(t, p.WaitFor(ctx, `document.querySelectorAll('#tree g.node:not(.dim)').length === 1`, 10*time.Second))
	require.Equal(t, "r249-n39", evalString(t, p, `document.querySelector('#tree g.node:not(.dim)').dataset.node`))
	require.Empty(t, p.Errors())
}
