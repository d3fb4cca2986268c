// Package chart checks the Helm chart (manifests/charts/hivesched) as Helm
// renders it: for each values combination that matters, every object
// decodes strictly into its API type, the scheduler configuration the chart
// writes is accepted by kube-scheduler's loader and validation and by the
// HiveSched args' validation, the profile is the shipped one, and the pod
// is hardened. make chart-test runs it with HIVESCHED_HELM set to the
// pinned helm binary (it is skipped without one: the scheduler's module
// does not depend on Helm).
package chart

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedvalidation "k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/hivesched/hivesched/apis/config"
	_ "github.com/hivesched/hivesched/apis/config/scheme"
	"github.com/hivesched/hivesched/apis/config/validation"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/cellspec"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

const (
	chartDir = "../../manifests/charts/hivesched"
	// The release namespace of every rendering: the chart creates the
	// scheduler's namespace, so the release lives elsewhere.
	releaseNamespace = "kube-system"
	kubeVersion      = "1.37.2"
)

// combinations are the values files of the chart's ci/ directory (the
// combinations that matter: second scheduler, default profile,
// ResourceSlices, one replica, admission off, every extra on), by name;
// hack/chart-test.sh lints and applies the same files.
func combinations(t *testing.T) map[string][]string {
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := map[string][]string{}
	for _, f := range files {
		out[strings.TrimSuffix(filepath.Base(f), "-values.yaml")] = []string{"-f", f}
	}
	return out
}

func helmBinary(t *testing.T) string {
	helm := os.Getenv("HIVESCHED_HELM")
	if helm == "" {
		t.Skip("HIVESCHED_HELM is not set: make chart-test runs this with the pinned helm")
	}
	return helm
}

// render is helm template of the chart with the given flags.
func render(t *testing.T, flags ...string) []byte {
	t.Helper()
	args := append([]string{"template", "hivesched", chartDir, "--namespace", releaseNamespace, "--kube-version", kubeVersion}, flags...)
	cmd := exec.Command(helmBinary(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "helm %s: %s", strings.Join(args, " "), stderr.String())
	return out
}

// renderError is helm template's error for flags that must be refused.
func renderError(t *testing.T, flags ...string) string {
	t.Helper()
	args := append([]string{"template", "hivesched", chartDir, "--namespace", releaseNamespace, "--kube-version", kubeVersion}, flags...)
	out, err := exec.Command(helmBinary(t), args...).CombinedOutput()
	require.Error(t, err, "helm %s rendered", strings.Join(args, " "))
	return string(out)
}

type object struct {
	kind, name, namespace string
	raw                   []byte
}

func objects(t *testing.T, rendered []byte) []object {
	t.Helper()
	reader := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(rendered)))
	var objs []object
	for {
		doc, err := reader.Read()
		if err == io.EOF {
			return objs
		}
		require.NoError(t, err)
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		require.NoError(t, sigsyaml.Unmarshal(doc, &meta))
		if meta.Kind == "" {
			continue
		}
		objs = append(objs, object{kind: meta.Kind, name: meta.Metadata.Name, namespace: meta.Metadata.Namespace, raw: doc})
	}
}

func find(t *testing.T, objs []object, kind, name string) object {
	t.Helper()
	for _, o := range objs {
		if o.kind == kind && o.name == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return object{}
}

func count(objs []object, kind string) int {
	n := 0
	for _, o := range objs {
		if o.kind == kind {
			n++
		}
	}
	return n
}

// decodeStrict decodes every object into its API type, refusing unknown
// fields: a misspelled field in a template fails here, not at apply.
func decodeStrict(t *testing.T, objs []object) {
	t.Helper()
	for _, o := range objs {
		var into any
		switch o.kind {
		case "Namespace":
			into = &corev1.Namespace{}
		case "ConfigMap":
			into = &corev1.ConfigMap{}
		case "ServiceAccount":
			into = &corev1.ServiceAccount{}
		case "Service":
			into = &corev1.Service{}
		case "Deployment":
			into = &appsv1.Deployment{}
		case "PodDisruptionBudget":
			into = &policyv1.PodDisruptionBudget{}
		case "ClusterRole":
			into = &rbacv1.ClusterRole{}
		case "ClusterRoleBinding":
			into = &rbacv1.ClusterRoleBinding{}
		case "Role":
			into = &rbacv1.Role{}
		case "RoleBinding":
			into = &rbacv1.RoleBinding{}
		case "ValidatingAdmissionPolicy":
			into = &admissionv1.ValidatingAdmissionPolicy{}
		case "ValidatingAdmissionPolicyBinding":
			into = &admissionv1.ValidatingAdmissionPolicyBinding{}
		case "NetworkPolicy":
			into = &networkingv1.NetworkPolicy{}
		case "CustomResourceDefinition":
			into = &apiextensionsv1.CustomResourceDefinition{}
		case "VirtualCluster":
			into = &hv1.VirtualCluster{}
		case "ServiceMonitor":
			// The Prometheus Operator's type is not a dependency: its
			// shape is checked in TestChartObservability.
			continue
		default:
			t.Fatalf("%s %s: a kind this test does not know", o.kind, o.name)
		}
		require.NoError(t, sigsyaml.UnmarshalStrict(o.raw, into), "%s %s", o.kind, o.name)
	}
}

// schedulerConfig loads the rendered ConfigMap's configuration as
// kube-scheduler does (strict, defaulted, converted), validates it and its
// HiveSched args.
func schedulerConfig(t *testing.T, objs []object) (*schedconfig.KubeSchedulerConfiguration, *config.HiveSchedArgs) {
	t.Helper()
	var cm corev1.ConfigMap
	require.NoError(t, sigsyaml.UnmarshalStrict(find(t, objs, "ConfigMap", "hivesched-scheduler-config").raw, &cm))
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(cm.Data["config.yaml"]), 0o600))
	cfg, err := options.LoadConfigFromFile(klog.Background(), path)
	require.NoError(t, err)
	require.NoError(t, schedvalidation.ValidateKubeSchedulerConfiguration(cfg))
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
	return cfg, args
}

func deployment(t *testing.T, objs []object) *appsv1.Deployment {
	var d appsv1.Deployment
	require.NoError(t, sigsyaml.UnmarshalStrict(find(t, objs, "Deployment", "hivesched-scheduler").raw, &d))
	return &d
}

// Every combination renders, decodes strictly, and gives a configuration
// the scheduler accepts; what each mode changes is what it renders.
func TestChartCombinations(t *testing.T) {
	for name, flags := range combinations(t) {
		t.Run(name, func(t *testing.T) {
			objs := objects(t, render(t, flags...))
			decodeStrict(t, objs)
			cfg, args := schedulerConfig(t, objs)
			profile := cfg.Profiles[0]
			d := deployment(t, objs)
			require.Equal(t, "hivesched-system", d.Namespace)
			// Every namespaced object of the scheduler is in its namespace
			// but those the shipped manifests put elsewhere.
			for _, o := range objs {
				switch {
				case o.namespace == "", o.namespace == "hivesched-system":
				case o.namespace == "kube-system" && (o.kind == "Role" || o.kind == "RoleBinding" || o.name == "hivesched-admission"):
				default:
					t.Errorf("%s %s in namespace %s", o.kind, o.name, o.namespace)
				}
			}
			// The readiness probe reads the inspect server, which listens
			// on the pod's address at the probe's port.
			require.Equal(t, ":10262", args.InspectBindAddress)
			container := d.Spec.Template.Spec.Containers[0]
			require.Equal(t, "/readyz", container.ReadinessProbe.HTTPGet.Path)
			require.Equal(t, "inspect", container.ReadinessProbe.HTTPGet.Port.String())
			require.Contains(t, container.Ports, corev1.ContainerPort{Name: "inspect", ContainerPort: 10262, Protocol: corev1.ProtocolTCP})

			switch name {
			case "default-profile":
				require.Equal(t, "default-scheduler", profile.SchedulerName)
				require.Equal(t, "default-scheduler", cfg.LeaderElection.ResourceName)
				require.Contains(t, configMapData(t, objs, "hivesched-admission")["profiles"], "default-scheduler")
			case "resource-slices":
				require.Equal(t, config.PhysicalClusterFromResourceSlices, args.PhysicalClusterFrom)
				require.Empty(t, args.PhysicalCluster.PhysicalCells)
				require.Equal(t, []string{"nvidia.com/gpu.clique", "topology.kubernetes.io/rack"}, args.SliceTopology.NodeGroupLabels)
			case "one-replica":
				require.EqualValues(t, 1, *d.Spec.Replicas)
				require.False(t, cfg.LeaderElection.LeaderElect)
				require.Equal(t, appsv1.RecreateDeploymentStrategyType, d.Spec.Strategy.Type)
				require.Zero(t, count(objs, "PodDisruptionBudget"), "a PDB of one replica blocks every drain")
			case "admission-off":
				require.Zero(t, count(objs, "ValidatingAdmissionPolicy"))
				require.Zero(t, count(objs, "ValidatingAdmissionPolicyBinding"))
			case "everything-on":
				require.Equal(t, config.BindGateFixed, args.BindGate)
				require.EqualValues(t, 32, args.MaxBindingPods)
				require.EqualValues(t, 10, args.VictimGracePeriodSeconds)
				require.EqualValues(t, 5, args.MaxBindAttempts)
				require.Equal(t, "ghcr.io/hivesched/hivesched-scheduler@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", container.Image)
				require.Contains(t, container.Command, "--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true")
				require.Equal(t, 2, count(objs, "VirtualCluster"))
			}
			if name != "default-profile" {
				require.Equal(t, "hivesched", profile.SchedulerName)
				require.Equal(t, "hivesched", cfg.LeaderElection.ResourceName)
			}
			if name != "one-replica" {
				require.True(t, cfg.LeaderElection.LeaderElect)
				require.EqualValues(t, 2, *d.Spec.Replicas)
				require.Equal(t, 1, count(objs, "PodDisruptionBudget"))
			}
			if name != "admission-off" {
				require.Equal(t, 5, count(objs, "ValidatingAdmissionPolicy"), "pod placement, GPU pods, node verdicts, the key and the scheduler's Secrets")
				require.Equal(t, 5, count(objs, "ValidatingAdmissionPolicyBinding"))
			}
			if name != "resource-slices" {
				// The physical cluster builds.
				k, err := cellcore.New(cellspec.Config(args.PhysicalCluster))
				require.NoError(t, err)
				require.Positive(t, k.CellCount())
			}
		})
	}
}

func configMapData(t *testing.T, objs []object, name string) map[string]string {
	var cm corev1.ConfigMap
	require.NoError(t, sigsyaml.UnmarshalStrict(find(t, objs, "ConfigMap", name).raw, &cm))
	return cm.Data
}

// The chart's profile is the shipped one: the same plugins, the same
// NodeResourcesFit args, and with the default values the same HiveSched
// args (the chart adds only the inspect address its probe needs). The
// plugin lists are one block of templates/_profile.tpl.
func TestChartProfileMatchesShippedConfigs(t *testing.T) {
	for mode, file := range map[string]string{"second-scheduler": "config-second-scheduler.yaml", "default-profile": "config-default-profile.yaml"} {
		t.Run(mode, func(t *testing.T) {
			shipped, err := options.LoadConfigFromFile(klog.Background(), filepath.Join("..", "..", "manifests", "scheduler", file))
			require.NoError(t, err)
			cfg, args := schedulerConfig(t, objects(t, render(t, "--set", "profile.mode="+mode)))
			want, have := shipped.Profiles[0], cfg.Profiles[0]
			require.Equal(t, want.SchedulerName, have.SchedulerName)
			require.Equal(t, want.Plugins, have.Plugins, "the plugin set of templates/_profile.tpl differs from %s", file)
			require.Equal(t, shipped.LeaderElection, cfg.LeaderElection)
			for i, pc := range want.PluginConfig {
				if pc.Name != hivesched.Name {
					require.Equal(t, pc, have.PluginConfig[i], "pluginConfig %s", pc.Name)
					continue
				}
				shippedArgs := pc.Args.(*config.HiveSchedArgs).DeepCopy()
				shippedArgs.InspectBindAddress = args.InspectBindAddress
				require.Equal(t, shippedArgs, args)
			}
			require.Len(t, have.PluginConfig, len(want.PluginConfig))
		})
	}
}

// The pod runs as the image's non-root user, read-only, with nothing to
// escalate, and writes only to its tmpfs; a configuration change rolls it.
func TestChartHardenedPod(t *testing.T) {
	objs := objects(t, render(t))
	d := deployment(t, objs)
	pod := d.Spec.Template.Spec
	require.True(t, *pod.SecurityContext.RunAsNonRoot)
	require.EqualValues(t, 65532, *pod.SecurityContext.RunAsUser)
	require.EqualValues(t, 65532, *pod.SecurityContext.RunAsGroup)
	require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
	require.Equal(t, "hivesched-scheduler", pod.ServiceAccountName)
	c := pod.Containers[0]
	require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	require.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	require.False(t, *c.SecurityContext.Privileged)
	require.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	require.Empty(t, c.SecurityContext.Capabilities.Add)
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	require.Equal(t, map[string]string{"config": "/etc/hivesched", "tmp": "/tmp"}, mounts)
	require.Equal(t, "/hivesched-scheduler", c.Command[0])
	require.Contains(t, c.Command, "--config=/etc/hivesched/config.yaml")
	require.Equal(t, "/livez", c.LivenessProbe.HTTPGet.Path)
	require.Equal(t, corev1.URISchemeHTTPS, c.LivenessProbe.HTTPGet.Scheme)
	require.NotNil(t, c.Resources.Limits.Memory())
	require.Equal(t, "system-cluster-critical", pod.PriorityClassName)

	checksum := d.Spec.Template.Annotations["checksum/config"]
	require.Len(t, checksum, 64)
	changed := deployment(t, objects(t, render(t, "--set", "args.permitWaitingTimeSeconds=90")))
	require.NotEqual(t, checksum, changed.Spec.Template.Annotations["checksum/config"], "a configuration change must roll the pods")
	same := deployment(t, objects(t, render(t, "--set", "replicas=3")))
	require.Equal(t, checksum, same.Spec.Template.Annotations["checksum/config"])
}

// The namespace carries the label the key policy needs and outlives the
// release, as do the CRDs; the chart's RBAC is the shipped RBAC with the
// lease named.
func TestChartKeepsStateAndGrants(t *testing.T) {
	objs := objects(t, render(t))
	var ns corev1.Namespace
	require.NoError(t, sigsyaml.UnmarshalStrict(find(t, objs, "Namespace", "hivesched-system").raw, &ns))
	require.Equal(t, "true", ns.Labels["hivesched.io/scheduler-namespace"])
	require.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"], "the pod meets the restricted profile")
	require.Equal(t, "keep", ns.Annotations["helm.sh/resource-policy"])
	for _, crd := range []string{"virtualclusters.hivesched.io", "affinitygroups.hivesched.io"} {
		var c apiextensionsv1.CustomResourceDefinition
		require.NoError(t, sigsyaml.UnmarshalStrict(find(t, objs, "CustomResourceDefinition", crd).raw, &c))
		require.Equal(t, "keep", c.Annotations["helm.sh/resource-policy"], crd)
	}
	require.Zero(t, count(objects(t, render(t, "--set", "crds.install=false")), "CustomResourceDefinition"))

	var lease rbacv1.Role
	for _, o := range objs {
		if o.kind == "Role" && o.name == "hivesched-scheduler" && o.namespace == "kube-system" {
			require.NoError(t, sigsyaml.UnmarshalStrict(o.raw, &lease))
		}
	}
	require.Equal(t, []string{"hivesched"}, lease.Rules[0].ResourceNames)
	moved := objects(t, render(t, "--set", "leaderElection.namespace=hivesched-leases,leaderElection.leaseName=gpu-scheduler"))
	found := false
	for _, o := range moved {
		if o.kind == "Role" && o.name == "hivesched-scheduler" && o.namespace == "hivesched-leases" {
			require.NoError(t, sigsyaml.UnmarshalStrict(o.raw, &lease))
			require.Equal(t, []string{"gpu-scheduler"}, lease.Rules[0].ResourceNames)
			found = true
		}
	}
	require.True(t, found, "the lease Role follows leaderElection.namespace")
	cfg, _ := schedulerConfig(t, moved)
	require.Equal(t, "gpu-scheduler", cfg.LeaderElection.ResourceName)
	require.Equal(t, "hivesched-leases", cfg.LeaderElection.ResourceNamespace)
}

// /metrics: a scraper's identity gets the non-resource URL (without it,
// 403), and the ServiceMonitor scrapes the Service's HTTPS port.
func TestChartObservability(t *testing.T) {
	objs := objects(t, render(t, combinations(t)["everything-on"]...))
	var reader rbacv1.ClusterRole
	require.NoError(t, sigsyaml.UnmarshalStrict(find(t, objs, "ClusterRole", "hivesched-metrics-reader").raw, &reader))
	require.Equal(t, []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}, reader.Rules)
	var binding rbacv1.ClusterRoleBinding
	require.NoError(t, sigsyaml.UnmarshalStrict(find(t, objs, "ClusterRoleBinding", "hivesched-metrics-reader").raw, &binding))
	require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus-k8s", Namespace: "monitoring"}}, binding.Subjects)

	var monitor struct {
		Spec struct {
			Selector  struct{ MatchLabels map[string]string } `json:"selector"`
			Endpoints []struct {
				Port, Scheme, Path string
			} `json:"endpoints"`
		} `json:"spec"`
	}
	require.NoError(t, sigsyaml.Unmarshal(find(t, objs, "ServiceMonitor", "hivesched-scheduler").raw, &monitor))
	var svc corev1.Service
	require.NoError(t, sigsyaml.UnmarshalStrict(find(t, objs, "Service", "hivesched-metrics").raw, &svc))
	for k, v := range monitor.Spec.Selector.MatchLabels {
		require.Equal(t, v, svc.Labels[k], "the ServiceMonitor selects the metrics Service by %s", k)
	}
	require.Equal(t, "https", monitor.Spec.Endpoints[0].Port)
	require.Equal(t, "https", svc.Spec.Ports[0].Name)

	// The dashboard: every hivesched_ metric it queries is one the
	// scheduler exports.
	var dashboard corev1.ConfigMap
	require.NoError(t, sigsyaml.UnmarshalStrict(find(t, objs, "ConfigMap", "hivesched-grafana-dashboard").raw, &dashboard))
	require.Equal(t, "1", dashboard.Labels["grafana_dashboard"])
	exported := exportedMetrics(t)
	queried := regexp.MustCompile(`hivesched_[a-z_]+`).FindAllString(dashboard.Data["hivesched.json"], -1)
	require.NotEmpty(t, queried)
	for _, m := range queried {
		base := strings.TrimSuffix(m, "_bucket")
		require.Contains(t, exported, base, "the dashboard queries %s, which plugins/metrics does not export", m)
	}

	// Without scrapers no binding is rendered; the ServiceMonitor is opt-in.
	plain := objects(t, render(t))
	for _, o := range plain {
		require.False(t, o.kind == "ClusterRoleBinding" && o.name == "hivesched-metrics-reader")
		require.NotEqual(t, "ServiceMonitor", o.kind)
	}
}

// exportedMetrics are the hivesched_ metric names plugins/metrics defines.
func exportedMetrics(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join("..", "..", "plugins", "metrics", "*.go"))
	require.NoError(t, err)
	named := regexp.MustCompile(`Name:\s+"([a-z_]+)"`)
	described := regexp.MustCompile(`metricsNamespace\+"(_[a-z_]+)"`)
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range named.FindAllStringSubmatch(string(src), -1) {
			names = append(names, "hivesched_"+m[1])
		}
		for _, m := range described.FindAllStringSubmatch(string(src), -1) {
			names = append(names, "hivesched"+m[1])
		}
	}
	sort.Strings(names)
	require.NotEmpty(t, names)
	return names
}

// Wrong combinations are refused at render, saying what to do.
func TestChartRefusesWrongValues(t *testing.T) {
	for flags, message := range map[string]string{
		"replicas=2,leaderElection.enabled=false": "needs leaderElection.enabled",
		// values.schema.json names the allowed values.
		"profile.mode=tertiary":     "second-scheduler",
		"physicalClusterFrom=Nodes": "ResourceSlices",
		// A misspelled top-level value is refused, not ignored.
		"replica=3":                     "replica",
		"args.inspectBindAddress=:9999": "inspect.port",
	} {
		t.Run(flags, func(t *testing.T) {
			require.Contains(t, renderError(t, "--set", flags), message)
		})
	}
	// The release in the namespace the chart would create.
	out, err := exec.Command(helmBinary(t), "template", "hivesched", chartDir, "--namespace", "hivesched-system", "--kube-version", kubeVersion).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "install the release in another namespace")
	// An unknown HiveSched arg renders (Helm does not know the args) but
	// the scheduler's loader refuses it.
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	var cm corev1.ConfigMap
	require.NoError(t, sigsyaml.UnmarshalStrict(find(t, objects(t, render(t, "--set", "args.maxBindingPod=3")), "ConfigMap", "hivesched-scheduler-config").raw, &cm))
	require.NoError(t, os.WriteFile(cfgPath, []byte(cm.Data["config.yaml"]), 0o600))
	_, err = options.LoadConfigFromFile(klog.Background(), cfgPath)
	require.ErrorContains(t, err, "maxBindingPod")
}
