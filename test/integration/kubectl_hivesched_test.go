package integration

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hivesched/hivesched/cmd/kubectl-hivesched/cli"
)

// khs runs `kubectl hivesched ARGS` against the inspect API at addr, with
// the cluster's admin kubeconfig (its bearer token authenticates).
func (c *cluster) khs(t *testing.T, addr string, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := cli.NewCommand(&out, &errOut)
	cmd.SetArgs(append(args, "--inspect-url", "http://"+addr, "--kubeconfig", c.kubeconfig))
	require.NoError(t, cmd.ExecuteContext(t.Context()), "kubectl hivesched %v: %s", args, errOut.String())
	return out.String()
}

// TestKubectlHivesched (issue 12): the plugin's commands against a running
// scheduler's inspect API, on a known state: VC a's gang runs on one node,
// VC b's opportunistic job scavenges the other, then b's guaranteed gang
// preempts it... and a gang of a that cannot fit waits.
func TestKubectlHivesched(t *testing.T) {
	c := startCluster(t)
	c.createNodes(t, "khs", 1, 2, 0)
	c.createNamespace(t, "team-a")
	c.createNamespace(t, "team-b")
	c.createVC(t, "vc-a", []string{"team-a"}, "V100-NODE", 1)
	c.createVC(t, "vc-b", []string{"team-b"}, "V100-NODE", 1)
	addr := freeAddr(t)
	c.startScheduler(t, physicalCluster("khs", 1, 2, 0), withInspect(addr))

	train := gangPods("team-a", "train", "vc-a", 0, 2, 4)
	c.createPods(t, train)
	c.waitBound(t, train, 30*time.Second)
	opp := gangPods("team-b", "sweep", "vc-b", -1, 1, 2)
	c.createPods(t, opp)
	c.waitBound(t, opp, 30*time.Second)
	big := gangPods("team-a", "big", "vc-a", 0, 1, 8)
	c.createPods(t, big)
	c.failedScheduling(t, big[0], "big", 20*time.Second)

	out := c.khs(t, addr, "cells")
	for _, want := range []string{"chain V100-RACK", "V100-NODE khs-r0-n0", "team-a/train(8)", "team-b/sweep(2)", "[UU UU  UU UU]", "[oo __  __ __]", "leaf cells: U used (guaranteed)"} {
		require.Contains(t, out, want, out)
	}
	node := c.khs(t, addr, "cells", "--node", "khs-r0-n1")
	require.NotContains(t, node, "khs-r0-n0 ", "only the asked node: %s", node)

	why := c.khs(t, addr, "why", "team-a/big-0")
	for _, want := range []string{"pod team-a/big-0", "affinity group team-a/big in virtual cluster vc-a: Pending", "team-a/train"} {
		require.Contains(t, why, want, why)
	}
	running := c.khs(t, addr, "why", "-n", "team-a", "train-0")
	require.Contains(t, running, "Allocated")
	require.Contains(t, running, "runs on khs-r0-n")

	vcs := c.khs(t, addr, "vcs")
	// TOTAL USED FREE LENT UNAVAILABLE OPP: b's opportunistic job runs on a's
	// node, outside a's cells (a's gang uses all of them).
	require.Regexp(t, `vc-a\s+Active\s+8\s+8\s+0\s+0\s+0\s+0`, vcs)
	require.Regexp(t, `vc-b\s+Active\s+8\s+0\s+8\s+0\s+0\s+2`, vcs)
	groups := c.khs(t, addr, "groups", "--vc", "vc-a")
	require.Contains(t, groups, "team-a/train")
	require.NotContains(t, groups, "team-b/sweep")

	dir := t.TempDir()
	pngPath := filepath.Join(dir, "cells.png")
	c.khs(t, addr, "cells", "-o", "png", "--out", pngPath)
	f, err := os.Open(pngPath)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	img, err := png.Decode(f)
	require.NoError(t, err)
	require.Greater(t, img.Bounds().Dx(), 100)
	svg := c.khs(t, addr, "cells", "-o", "svg")
	require.True(t, strings.HasPrefix(svg, "<svg "), svg[:min(len(svg), 80)])
	require.Contains(t, svg, "vc-a")

	// An unknown node is the API's 404, said plainly.
	var out2, errOut bytes.Buffer
	cmd := cli.NewCommand(&out2, &errOut)
	cmd.SetArgs([]string{"cells", "--node", "nope", "--inspect-url", "http://" + addr, "--kubeconfig", c.kubeconfig})
	err = cmd.ExecuteContext(t.Context())
	require.Error(t, err)
	require.Contains(t, err.Error(), "nope")
}
