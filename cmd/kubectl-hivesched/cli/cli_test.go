package cli

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
)

// The JSON in testdata is the real inspect API's answers on a known state
// (plugins/inspect TestCLIFixtures keeps them current); the .golden files
// are this command's output on them, rewritten with -update and reviewed.
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func run(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCommand(&out, &errOut)
	cmd.SetArgs(args)
	require.NoError(t, cmd.Execute(), errOut.String())
	return out.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./cmd/kubectl-hivesched/... -update")
	require.Equal(t, string(want), got)
}

func TestGoldenText(t *testing.T) {
	for name, args := range map[string][]string{
		"cells":      {"cells", "--from-file", "testdata/cells.json"},
		"cells-vc-b": {"cells", "--vc", "b", "--from-file", "testdata/cells-vc-b.json"},
		"vcs":        {"vcs", "--from-file", "testdata/virtualclusters.json"},
		"groups":     {"groups", "--from-file", "testdata/affinitygroups.json"},
	} {
		t.Run(name, func(t *testing.T) { golden(t, name, run(t, args...)) })
	}
}

// The known state shows what the text must: used, opportunistic, bad and
// free leaves in their node's map, and the groups on each node.
func TestCellsText(t *testing.T) {
	out := run(t, "cells", "--from-file", "testdata/cells.json")
	require.Contains(t, out, "V100-NODE r0-n0")
	require.Contains(t, out, "[UU UU  UU UU]")
	require.Contains(t, out, "[XX XX  XX XX]", "r1-n7 is bad")
	require.Contains(t, out, "oo", "opportunistic leaves")
	require.Contains(t, out, "ns/a-0(8)")
}

func TestWhyText(t *testing.T) {
	prio := int32(0)
	ex := iv1.PodExplanation{Pod: "ns/big-0",
		Group:   &iv1.AffinityGroup{Name: "ns/big", VirtualCluster: "b", State: "Pending", Priority: prio},
		Summary: "waits: it needs 4 pods of 8 leaf cells in virtual cluster b, whose cells are held by equal or higher priority groups",
		Holders: []iv1.Holder{{Group: "ns/b-0", Priority: 0, LeafCells: 8}, {Group: "ns/opp-0", Priority: -1, LeafCells: 4, Preemptible: true}}}
	f := filepath.Join(t.TempDir(), "why.json")
	b, err := json.Marshal(&ex)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(f, b, 0o644))
	golden(t, "why", run(t, "why", "ns/big-0", "--from-file", f))
}

func readCells(t testing.TB, path string) *iv1.ClusterCells {
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var c iv1.ClusterCells
	require.NoError(t, json.Unmarshal(raw, &c))
	return &c
}

// scaled copies the fixture's racks until the cluster has nodes nodes.
func scaled(t testing.TB, nodes int) *iv1.ClusterCells {
	base := readCells(t, "testdata/cells.json")
	ch := base.Chains[0]
	racks := ch.Cells
	perRack := len(racks[0].Children)
	out := &iv1.ClusterCells{Chains: []iv1.Chain{{Name: ch.Name, LeafCellType: ch.LeafCellType, Levels: ch.Levels}}}
	for i := 0; len(out.Chains[0].Cells)*perRack < nodes; i++ {
		r := racks[i%len(racks)]
		r.Address = fmt.Sprintf("rack%d", i)
		out.Chains[0].Cells = append(out.Chains[0].Cells, r)
	}
	return out
}

func renderBoth(t testing.TB, cells *iv1.ClusterCells) (pngBytes, svgBytes int, pngTime, svgTime time.Duration) {
	pic := layoutPicture(cells, map[string]string{"ns/opp-0": "a"})
	var pb, sb bytes.Buffer
	start := time.Now()
	require.NoError(t, pic.writePNG(&pb))
	pngTime = time.Since(start)
	img, err := png.Decode(bytes.NewReader(pb.Bytes()))
	require.NoError(t, err)
	require.Equal(t, pic.w, img.Bounds().Dx())
	start = time.Now()
	require.NoError(t, pic.writeSVG(&sb))
	svgTime = time.Since(start)
	// Well-formed XML, start to end.
	dec := xml.NewDecoder(bytes.NewReader(sb.Bytes()))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
	}
	return pb.Len(), sb.Len(), pngTime, svgTime
}

func TestPictureOneNode(t *testing.T) {
	cells := readCells(t, "testdata/cells.json")
	ch := &cells.Chains[0]
	ch.Cells = ch.Cells[:1]
	ch.Cells[0].Children = ch.Cells[0].Children[:1]
	renderBoth(t, cells)
}

// 10k nodes render without error; the figures are logged (go test -v).
func TestPictureTenThousandNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("renders 80k leaf cells")
	}
	cells := scaled(t, 10000)
	p, s, pt, st := renderBoth(t, cells)
	t.Logf("10k nodes: PNG %d bytes in %v, SVG %d bytes in %v", p, pt, s, st)
}

// The picture of the demo's state, for the README (docs/cells.png):
// go test ./cmd/kubectl-hivesched/cli -run TestReadmePicture -update.
func TestReadmePicture(t *testing.T) {
	pic := layoutPicture(readCells(t, "testdata/cells.json"), map[string]string{"ns/opp-0": "a", "ns/opp-1": "a"})
	var b bytes.Buffer
	require.NoError(t, pic.writePNG(&b))
	if *update {
		require.NoError(t, os.WriteFile(filepath.Join("..", "..", "..", "docs", "cells.png"), b.Bytes(), 0o644))
	}
}
