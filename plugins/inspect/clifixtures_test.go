package inspect

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
	"github.com/hivesched/hivesched/plugins/cellcore"
)

var updateCLIFixtures = flag.Bool("update-cli-fixtures", false, "rewrite cmd/kubectl-hivesched/cli/testdata/*.json from the inspect API")

// TestCLIFixtures: kubectl-hivesched's golden tests read answers of the
// inspect API saved in its testdata. They are the real API's answers on a
// known state (testServer's 16 nodes, plus a waiting group and a bad
// node), checked here to be what the API answers now, so the CLI's tests
// never drift from the API. Rewrite them with -update-cli-fixtures.
func TestCLIFixtures(t *testing.T) {
	p := testServer(t, 16)
	d, err := p.core.Schedule(cellcore.AffinityGroupSpec{Name: "ns/big", VirtualCluster: "b", Priority: 0,
		Members: []cellcore.AffinityGroupMember{{PodNumber: 4, LeafCellNumber: 8}}})
	require.NoError(t, err)
	require.Equal(t, cellcore.Wait, d.Kind, d.Reason)
	require.NoError(t, p.core.SetNodeHealth("r1-n7", cellcore.NodeBad))
	h := p.Handler()
	dir := filepath.Join("..", "..", "cmd", "kubectl-hivesched", "cli", "testdata")
	for file, path := range map[string]string{
		"cells.json":           "cells",
		"cells-vc-b.json":      "cells?vc=b",
		"virtualclusters.json": "virtualclusters",
		"affinitygroups.json":  "affinitygroups",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, asUser(httptest.NewRequest(http.MethodGet, iv1.PathPrefix+path, nil), "admin"))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		got := rec.Body.Bytes()
		if path == "cells" || path == "cells?vc=b" {
			// The time of the answer is the one thing that changes.
			var c iv1.ClusterCells
			require.NoError(t, json.Unmarshal(got, &c))
			c.GeneratedAt = time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
			got, err = json.Marshal(&c)
			require.NoError(t, err)
		}
		var pretty bytes.Buffer
		require.NoError(t, json.Indent(&pretty, got, "", " "))
		pretty.WriteByte('\n')
		target := filepath.Join(dir, file)
		if *updateCLIFixtures {
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(target, pretty.Bytes(), 0o644))
			continue
		}
		want, err := os.ReadFile(target)
		require.NoError(t, err, "run go test ./plugins/inspect/ -run TestCLIFixtures -update-cli-fixtures")
		require.Equal(t, string(want), pretty.String(), "%s is not what the inspect API answers now: rerun with -update-cli-fixtures and review", target)
	}
}
