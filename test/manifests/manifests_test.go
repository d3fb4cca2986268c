// Package manifests checks that the shipped scheduler configurations and
// samples are valid: the configurations load through kube-scheduler's own
// loader with the HiveSched args, their physical cluster builds, and the
// sample VirtualClusters fit it.
package manifests

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/hivesched/hivesched/apis/config"
	_ "github.com/hivesched/hivesched/apis/config/scheme"
	"github.com/hivesched/hivesched/apis/config/validation"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/cellspec"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

func coreFromConfig(t *testing.T, file string) *cellcore.Core {
	_, k := argsFromConfig(t, file)
	return k
}

// argsFromConfig loads a scheduler configuration file as kube-scheduler
// does (strict decoding) and returns its HiveSched args, validated, and the
// cell core they build.
func argsFromConfig(t *testing.T, file string) (*config.HiveSchedArgs, *cellcore.Core) {
	cfg, err := options.LoadConfigFromFile(klog.Background(), file)
	require.NoError(t, err)
	require.Len(t, cfg.Profiles, 1)
	var args *config.HiveSchedArgs
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if pc.Name == hivesched.Name {
			a, ok := pc.Args.(*config.HiveSchedArgs)
			require.True(t, ok, "args decoded as %T", pc.Args)
			args = a
		}
	}
	require.NotNil(t, args)
	require.NoError(t, validation.ValidateHiveSchedArgs(nil, args))
	k, err := cellcore.New(cellspec.Config(args.PhysicalCluster))
	require.NoError(t, err)
	return args, k
}

// hivedSchedulerConfig writes a scheduler configuration whose HiveSched args
// carry physicalCluster (a HiveD config's section, as it is).
func hivedSchedulerConfig(t *testing.T, physicalCluster any) string {
	cfg := map[string]any{
		"apiVersion": "kubescheduler.config.k8s.io/v1",
		"kind":       "KubeSchedulerConfiguration",
		"profiles": []any{map[string]any{
			"schedulerName": "hivedscheduler",
			"plugins":       map[string]any{"multiPoint": map[string]any{"enabled": []any{map[string]any{"name": hivesched.Name}}}},
			"pluginConfig":  []any{map[string]any{"name": hivesched.Name, "args": map[string]any{"physicalCluster": physicalCluster}}},
		}},
	}
	raw, err := sigsyaml.Marshal(cfg)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	return path
}

func readHivedConfig(t *testing.T) map[string]any {
	raw, err := os.ReadFile(filepath.Join("testdata", "hived-config.yaml"))
	require.NoError(t, err)
	var hived map[string]any
	require.NoError(t, sigsyaml.Unmarshal(raw, &hived))
	return hived
}

// A HiveD config's physicalCluster section, skuTypes included, loads as
// HiveSched args unchanged. skuTypes is kept in the args and not used.
func TestHivedPhysicalClusterLoads(t *testing.T) {
	pc := readHivedConfig(t)["physicalCluster"].(map[string]any)
	args, k := argsFromConfig(t, hivedSchedulerConfig(t, pc))
	// K80 pool, 3 nodes, 12 GPUs; V100 rack, 2 nodes, 8 switches, 16 GPUs.
	require.Equal(t, 1+3+12+1+2+8+16, k.CellCount())
	sku := args.PhysicalCluster.SkuTypes["K80"]
	require.Equal(t, resource.MustParse("5"), sku["cpu"])
	require.Equal(t, resource.MustParse("54Gi"), sku["memory"])
	require.Equal(t, resource.MustParse("1"), sku["gpu"])
	require.Len(t, args.PhysicalCluster.SkuTypes, 2)

	// Decoding stays strict: a misspelled section is still an error.
	pc["skuType"] = pc["skuTypes"]
	_, err := options.LoadConfigFromFile(klog.Background(), hivedSchedulerConfig(t, pc))
	require.ErrorContains(t, err, `unknown field "physicalCluster.skuType"`)
}

func TestSchedulerConfigurations(t *testing.T) {
	for _, f := range []string{"config-second-scheduler.yaml", "config-default-profile.yaml"} {
		t.Run(f, func(t *testing.T) {
			path := filepath.Join("..", "..", "manifests", "scheduler", f)
			k := coreFromConfig(t, path)
			require.Positive(t, k.CellCount())

			// HiveD's pods pass NodeResourcesFit: the profile ignores the
			// resource they carry and no node advertises.
			cfg, err := options.LoadConfigFromFile(klog.Background(), path)
			require.NoError(t, err)
			require.NoError(t, schedvalidation.ValidateKubeSchedulerConfiguration(cfg))
			var fit *schedconfig.NodeResourcesFitArgs
			for _, pc := range cfg.Profiles[0].PluginConfig {
				if pc.Name == names.NodeResourcesFit {
					fit, _ = pc.Args.(*schedconfig.NodeResourcesFitArgs)
				}
			}
			require.NotNil(t, fit, "no NodeResourcesFit args")
			require.Contains(t, fit.IgnoredResources, hivesched.HivedSchedulingEnableResource)
			require.NotNil(t, fit.ScoringStrategy, "the default scoring strategy is kept")
			require.Equal(t, schedconfig.LeastAllocated, fit.ScoringStrategy.Type)

			// The API server comes from clientConnection.kubeconfig
			// (kube-scheduler ignores --kubeconfig when --config is given):
			// empty in the samples, for deployment.yaml's service account,
			// on the line hack/local-up.sh fills in with its kubeconfig.
			require.Empty(t, cfg.ClientConnection.Kubeconfig)
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Regexp(t, `(?m)^clientConnection:\n(  #.*\n)*  kubeconfig: ""$`, string(raw))
		})
	}
}

// vcSpec is the cell core's view of a VirtualCluster's cells.
func vcSpec(vc hv1.VirtualCluster) cellcore.VirtualClusterSpec {
	spec := cellcore.VirtualClusterSpec{Name: vc.Name}
	for _, c := range vc.Spec.VirtualCells {
		spec.VirtualCells = append(spec.VirtualCells, cellcore.VirtualCellSpec{CellType: c.CellType, CellNumber: c.CellNumber})
	}
	for _, c := range vc.Spec.PinnedCells {
		spec.PinnedCells = append(spec.PinnedCells, cellcore.PinnedCellSpec{PinnedCellID: c.PinnedCellID})
	}
	return spec
}

func TestSampleVirtualClustersFit(t *testing.T) {
	k := coreFromConfig(t, filepath.Join("..", "..", "manifests", "scheduler", "config-second-scheduler.yaml"))
	raw, err := os.ReadFile(filepath.Join("..", "..", "manifests", "samples", "virtualclusters.yaml"))
	require.NoError(t, err)
	dec := yaml.NewDocumentDecoder(io.NopCloser(bytes.NewReader(raw)))
	n := 0
	buf := make([]byte, 1<<16)
	for {
		m, err := dec.Read(buf)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		var vc hv1.VirtualCluster
		require.NoError(t, sigsyaml.UnmarshalStrict(buf[:m], &vc))
		_, err = k.SetVirtualCluster(vcSpec(vc))
		require.NoError(t, err, vc.Name)
		n++
	}
	require.Equal(t, 2, n)
	require.NoError(t, k.CheckInvariants())
}

// The inspect API's opt-in manifests decode strictly; the Service selects
// the scheduler's pods on the port the reader role names; the NetworkPolicy
// fails closed (issue 28, item 6): no rule admits the inspect port, from
// anywhere, until the operator adds the API servers' addresses; rbac.yaml
// grants the virtual resource the server authorizes against, and binds
// nobody but the example group.
func TestInspectServiceProxyManifest(t *testing.T) {
	kinds := map[string]bool{}
	for _, file := range []string{"service-proxy.yaml", "rbac.yaml"} {
		for _, doc := range documents(t, "manifests", "inspect", file) {
			kind := kindOf(t, doc)
			kinds[kind] = true
			switch kind {
			case "Service":
				var s corev1.Service
				require.NoError(t, sigsyaml.UnmarshalStrict(doc, &s))
				require.Equal(t, "hivesched-scheduler", s.Spec.Selector["app"])
				require.Equal(t, int32(10262), s.Spec.Ports[0].Port)
			case "Role":
				var r rbacv1.Role
				require.NoError(t, sigsyaml.UnmarshalStrict(doc, &r))
				require.Equal(t, []string{"get"}, r.Rules[0].Verbs)
				require.Contains(t, r.Rules[0].ResourceNames, "http:hivesched-inspect:10262", "the path kubectl hivesched asks")
			case "RoleBinding":
				var b rbacv1.RoleBinding
				require.NoError(t, sigsyaml.UnmarshalStrict(doc, &b))
			case "ClusterRole":
				var r rbacv1.ClusterRole
				require.NoError(t, sigsyaml.UnmarshalStrict(doc, &r))
				require.Len(t, r.Rules, 1)
				require.Equal(t, []string{iv1.AuthorizationGroup}, r.Rules[0].APIGroups)
				require.Equal(t, []string{iv1.AuthorizationResource}, r.Rules[0].Resources)
				switch r.Name {
				case "hivesched-inspect-viewer":
					require.Equal(t, []string{"get"}, r.Rules[0].Verbs)
				case "hivesched-inspect-admin":
					require.Equal(t, []string{"get", "list"}, r.Rules[0].Verbs)
				default:
					t.Fatalf("unexpected ClusterRole %s", r.Name)
				}
			case "ClusterRoleBinding":
				var b rbacv1.ClusterRoleBinding
				require.NoError(t, sigsyaml.UnmarshalStrict(doc, &b))
				require.Equal(t, []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: "gpu-operators"}}, b.Subjects)
			case "NetworkPolicy":
				var np networkingv1.NetworkPolicy
				require.NoError(t, sigsyaml.UnmarshalStrict(doc, &np))
				require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes)
				for _, rule := range np.Spec.Ingress {
					require.NotEmpty(t, rule.Ports, "a rule without ports admits every port, the inspect port too")
					for _, port := range rule.Ports {
						require.NotEqual(t, 10262, port.Port.IntValue(), "the inspect port is admitted from nowhere until the operator adds the API servers")
					}
					for _, from := range rule.From {
						require.Nil(t, from.IPBlock, "no placeholder source range")
					}
				}
			default:
				t.Fatalf("unexpected kind %q", kind)
			}
		}
	}
	require.Len(t, kinds, 6)
}

// config-stock.yaml is make conformance's baseline: kube-scheduler's stock
// default profile in hivesched's binary. It must be that and no more: a
// hivesched plugin enabled there would make the side-by-side comparison
// compare hivesched with itself.
func TestStockConfiguration(t *testing.T) {
	path := filepath.Join("..", "..", "manifests", "scheduler", "config-stock.yaml")
	cfg, err := options.LoadConfigFromFile(klog.Background(), path)
	require.NoError(t, err)
	require.NoError(t, schedvalidation.ValidateKubeSchedulerConfiguration(cfg))
	require.Len(t, cfg.Profiles, 1)
	p := cfg.Profiles[0]
	require.Equal(t, "default-scheduler", p.SchedulerName)
	ours := map[string]bool{hivesched.Name: true, hivesched.DRAName: true, hivesched.PreemptionName: true}
	if p.Plugins != nil {
		for _, set := range []schedconfig.PluginSet{p.Plugins.MultiPoint, p.Plugins.QueueSort, p.Plugins.PreFilter,
			p.Plugins.Filter, p.Plugins.PostFilter, p.Plugins.PreScore, p.Plugins.Score, p.Plugins.Reserve,
			p.Plugins.Permit, p.Plugins.PreBind, p.Plugins.Bind, p.Plugins.PostBind} {
			for _, pl := range set.Enabled {
				require.False(t, ours[pl.Name], "the stock profile enables %s", pl.Name)
			}
			require.Empty(t, set.Disabled, "the stock profile disables a default plugin")
		}
	}
	for _, pc := range p.PluginConfig {
		require.False(t, ours[pc.Name], "the stock profile configures %s", pc.Name)
	}
	// hack/local-up.sh fills in this line, as in the other configurations.
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Regexp(t, `(?m)^clientConnection:\n(  #.*\n)*  kubeconfig: ""$`, string(raw))
}
