package slicetopology

import (
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/hivesched/hivesched/plugins/cellspec"
	"github.com/hivesched/hivesched/plugins/dra/dratest"
)

var update = flag.Bool("update", false, "rewrite plugins/cellcore/testdata/derived-*.json")

// fixtureCluster is the local cluster with a rack of one node that lost a
// GPU (gpu-c0, 7 GPUs) and a node without a rack label (gpu-x0).
func fixtureCluster() ([]*v1.Node, []*resourceapi.ResourceSlice) {
	nodes, slices := localCluster()
	short := dratest.Slice("gpu-c0", v100, 8)
	short.Spec.Devices = short.Spec.Devices[:7]
	nodes = append(nodes, node("gpu-c0", rackKey, "rack-c"), node("gpu-x0"))
	slices = append(slices, short, dratest.Slice("gpu-x0", v100, 8))
	return nodes, slices
}

// TestCoreFixtures: the derived clusters the cell core's own guarantee
// test runs on (plugins/cellcore/derived_guarantee_test.go, which cannot
// import this package: plugins/dra imports the core) are what Build
// derives now: the fixture cluster, and the same after gpu-b3's slice is
// deleted. go test ./plugins/slicetopology -run TestCoreFixtures -update
// rewrites them.
func TestCoreFixtures(t *testing.T) {
	nodes, slices := fixtureCluster()
	var without []*resourceapi.ResourceSlice
	for _, s := range slices {
		if *s.Spec.NodeName != "gpu-b3" {
			without = append(without, s)
		}
	}
	for file, in := range map[string][]*resourceapi.ResourceSlice{"derived-cluster.json": slices, "derived-without-gpu-b3.json": without} {
		res, err := Build(opts(rackKey), nodes, in)
		require.NoError(t, err)
		got, err := json.MarshalIndent(cellspec.Config(res.PhysicalCluster), "", "  ")
		require.NoError(t, err)
		path := "../cellcore/testdata/" + file
		if *update {
			require.NoError(t, os.WriteFile(path, append(got, '\n'), 0o644))
			continue
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err, "go test ./plugins/slicetopology -run TestCoreFixtures -update writes it")
		require.JSONEq(t, string(want), string(got), "%s is stale: go test ./plugins/slicetopology -run TestCoreFixtures -update", path)
	}
}
