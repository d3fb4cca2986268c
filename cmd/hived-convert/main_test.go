package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
)

// The HiveD-shaped configuration the manifests tests load too.
var hivedConfig = filepath.Join("..", "..", "test", "manifests", "testdata", "hived-config.yaml")

// TestMain runs main itself when re-executed by TestCommand.
func TestMain(m *testing.M) {
	if os.Getenv("HIVED_CONVERT_RUN_MAIN") == "1" {
		os.Args = append([]string{"hived-convert"}, strings.Fields(os.Getenv("HIVED_CONVERT_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func decodeVCs(t *testing.T, out []byte) []hv1.VirtualCluster {
	var vcs []hv1.VirtualCluster
	dec := utilyaml.NewDocumentDecoder(io.NopCloser(bytes.NewReader(out)))
	buf := make([]byte, 1<<16)
	for {
		n, err := dec.Read(buf)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if len(bytes.TrimSpace(buf[:n])) == 0 {
			continue
		}
		var vc hv1.VirtualCluster
		require.NoError(t, yaml.UnmarshalStrict(buf[:n], &vc), string(buf[:n]))
		require.Equal(t, "hivesched.io/v1alpha1", vc.APIVersion)
		require.Equal(t, "VirtualCluster", vc.Kind)
		require.Empty(t, validation.IsDNS1123Subdomain(vc.Name))
		vcs = append(vcs, vc)
	}
	return vcs
}

func TestConvertHivedConfig(t *testing.T) {
	raw, err := os.ReadFile(hivedConfig)
	require.NoError(t, err)
	out, notes, err := convert(raw, []string{hv1.AllNamespaces})
	require.NoError(t, err)
	vcs := decodeVCs(t, out)

	byName := map[string]hv1.VirtualCluster{}
	for _, vc := range vcs {
		byName[vc.Name] = vc
	}
	require.Len(t, byName, 3)
	vc1 := byName["vc1"]
	require.Equal(t, "VC1", vc1.Annotations[hv1.AnnotationHivedName])
	require.Equal(t, []hv1.VirtualCellSpec{{CellType: "K80-NODE-POOL.K80-NODE", CellNumber: 1}}, vc1.Spec.VirtualCells)
	require.Equal(t, []hv1.PinnedCellSpec{{PinnedCellID: "VC1-K80"}}, vc1.Spec.PinnedCells)
	require.Equal(t, []string{"*"}, vc1.Spec.AllowedNamespaces)
	require.Equal(t, "vc_2", byName["vc-2"].Annotations[hv1.AnnotationHivedName])
	require.Equal(t, []hv1.VirtualCellSpec{{CellType: "V100-RACK", CellNumber: 1}}, byName["vc-2"].Spec.VirtualCells)
	require.Empty(t, byName["default"].Annotations, "a Kubernetes name is kept as it is")

	require.Contains(t, notes, `virtual cluster "VC1" becomes VirtualCluster "vc1" (Kubernetes names are lowercase RFC 1123 subdomains): its pods must name virtualCluster: vc1`)
	require.Contains(t, notes, `virtual cluster "vc_2" becomes VirtualCluster "vc-2" (Kubernetes names are lowercase RFC 1123 subdomains): its pods must name virtualCluster: vc-2`)
	require.Contains(t, strings.Join(notes, "\n"), `allowedNamespaces: ["*"]`)
	require.Len(t, notes, 3)

	// The VirtualClusters fit the HiveD configuration's physical cluster
	// (whose section is HiveSched's physicalCluster as it is).
	var hived struct {
		PhysicalCluster cellcore.Config `json:"physicalCluster"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &hived))
	k, err := cellcore.New(hived.PhysicalCluster)
	require.NoError(t, err)
	for _, vc := range vcs {
		spec := cellcore.VirtualClusterSpec{Name: vc.Name}
		for _, c := range vc.Spec.VirtualCells {
			spec.VirtualCells = append(spec.VirtualCells, cellcore.VirtualCellSpec{CellType: c.CellType, CellNumber: c.CellNumber})
		}
		for _, c := range vc.Spec.PinnedCells {
			spec.PinnedCells = append(spec.PinnedCells, cellcore.PinnedCellSpec{PinnedCellID: c.PinnedCellID})
		}
		_, err := k.SetVirtualCluster(spec)
		require.NoError(t, err, vc.Name)
	}
	require.NoError(t, k.CheckInvariants())

	// Namespaces given: no note about them.
	out, notes, err = convert(raw, []string{"team-a", "team-b"})
	require.NoError(t, err)
	for _, vc := range decodeVCs(t, out) {
		require.Equal(t, []string{"team-a", "team-b"}, vc.Spec.AllowedNamespaces)
	}
	require.Len(t, notes, 2)
}

func TestConvertErrors(t *testing.T) {
	all := []string{"*"}
	for name, tc := range map[string]struct {
		in         string
		namespaces []string
		want       string
	}{
		"no section":     {"physicalCluster: {}", all, "no virtualClusters section"},
		"not yaml":       {"virtualClusters: [", all, "not valid YAML"},
		"not a map":      {"virtualClusters: [a, b]", all, "not a HiveD configuration"},
		"unknown field":  {"virtualClusters:\n  vc1:\n    virtualCell: []", all, `virtualClusters.vc1: json: unknown field "virtualCell"`},
		"collision":      {"virtualClusters:\n  VC1: {}\n  vc1: {}", all, `virtual clusters "VC1" and "vc1" both become VirtualCluster "vc1"`},
		"no name left":   {"virtualClusters:\n  ___: {}", all, `"___" cannot be made a Kubernetes name`},
		"no cell type":   {"virtualClusters:\n  a: {virtualCells: [{cellNumber: 1}]}", all, "virtualClusters.a.virtualCells[0]: needs a cellType"},
		"empty pinned":   {"virtualClusters:\n  a: {pinnedCells: [{}]}", all, "virtualClusters.a.pinnedCells[0]: pinnedCellId is empty"},
		"bad namespace":  {"virtualClusters:\n  a: {}", []string{"Team_A"}, `-allowed-namespaces: "Team_A" is not a namespace name`},
		"no namespace":   {"virtualClusters:\n  a: {}", nil, "-allowed-namespaces is empty"},
		"empty section":  {"virtualClusters: {}", all, "no virtualClusters section (or it is empty)"},
		"negative cells": {"virtualClusters:\n  a: {virtualCells: [{cellType: X, cellNumber: -1}]}", all, "cellNumber of at least 0"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := convert([]byte(tc.in), tc.namespaces)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestKubeName(t *testing.T) {
	for in, want := range map[string]string{"default": "default", "VC1": "vc1", "vc_a": "vc-a", "My VC!": "my-vc", "_x_": "x", "a.b": "a.b"} {
		got, err := kubeName(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
}

// The command: VirtualClusters on stdout, notes on stderr, exit 1 on error.
func TestCommand(t *testing.T) {
	run := func(args ...string) (string, string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCommand$")
		cmd.Env = append(os.Environ(), "HIVED_CONVERT_RUN_MAIN=1", "HIVED_CONVERT_ARGS="+strings.Join(args, " "))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	stdout, stderr, err := run("-allowed-namespaces=ml", hivedConfig)
	require.NoError(t, err, stderr)
	require.Len(t, decodeVCs(t, []byte(stdout)), 3)
	require.Contains(t, stderr, `hived-convert: virtual cluster "VC1" becomes VirtualCluster "vc1"`)
	require.NotContains(t, stdout, "hived-convert:")

	_, stderr, err = run(filepath.Join(t.TempDir(), "missing.yaml"))
	require.Error(t, err)
	require.Contains(t, stderr, "no such file or directory")
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 1, exit.ExitCode())
}
