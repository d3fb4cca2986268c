// Command chartgen writes the Helm chart's copies of the shipped manifests
// (manifests/charts/hivesched/templates/generated) from the manifests
// themselves: the CRDs, the scheduler's RBAC, the admission policies, the
// inspect API's roles and the sample VirtualClusters. Each object is taken
// as it is, with only what an installation chooses put in its place: the
// scheduler's namespace, the leader lease's namespace and name, the
// admission parameters' namespace and values, the chart's labels, and
// helm.sh/resource-policy: keep on the CRDs. make verify runs it with
// -check, which fails when the chart's copies are not what it would write.
//
//	go run ./hack/chartgen         # rewrite the chart's copies
//	go run ./hack/chartgen -check  # compare only
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// The shipped namespaces the chart makes configurable.
const (
	shippedSchedulerNamespace = "hivesched-system"
	shippedLeaseNamespace     = "kube-system"
	shippedParamsNamespace    = "kube-system"
	shippedParamsName         = "hivesched-admission"
	schedulerRoleName         = "hivesched-scheduler"
	shippedInspectPort        = "10262"
)

// Placeholders the objects carry through YAML marshalling; each is replaced
// by a template expression afterwards (quoted placeholders include their
// quotes, so that a list or a computed string takes their place whole).
var placeholders = []struct{ placeholder, template string }{
	{"'@@NAMESPACE@@'", `{{ include "hivesched.namespace" . }}`},
	{"'@@LEASE_NAMESPACE@@'", `{{ .Values.leaderElection.namespace }}`},
	{"'@@LEASE_NAMES@@'", `[{{ include "hivesched.leaseName" . | quote }}]`},
	{"'@@PARAMS_NAMESPACE@@'", `{{ .Values.admission.paramsNamespace }}`},
	{"'@@LEAF_RESOURCES@@'", `{{ include "hivesched.admissionLeafResources" . | quote }}`},
	{"'@@PROFILES@@'", `{{ include "hivesched.admissionProfiles" . | quote }}`},
	// Inside a string: the service proxy's names of the inspect port.
	{"@@INSPECT_PORT@@", `{{ .Values.inspect.port }}`},
}

const labelsKey = "@@LABELS@@"

var labelsLine = regexp.MustCompile(`(?m)^( *)'` + labelsKey + `': ""$`)

// chartFile is one generated template: the manifests it is made of, the
// condition it is rendered under, and what it changes in each object.
type chartFile struct {
	name      string
	sources   []string
	condition string
	// keep says whether an object is copied (nil: every object).
	keep func(obj map[string]any) bool
	// condition renders the file only when true ("": always).
	// adapt changes an object for the chart, in place.
	adapt func(obj map[string]any) error
}

func chartFiles() []chartFile {
	return []chartFile{
		{
			name:      "crds.yaml",
			sources:   []string{"manifests/crds/hivesched.io_affinitygroups.yaml", "manifests/crds/hivesched.io_virtualclusters.yaml"},
			condition: ".Values.crds.install",
			adapt: func(obj map[string]any) error {
				// Neither an uninstall nor an upgrade that drops them may
				// delete the CRDs, and with them every VirtualCluster and
				// AffinityGroup.
				setPath(obj, "keep", "metadata", "annotations", "helm.sh/resource-policy")
				return nil
			},
		},
		{
			name:      "rbac.yaml",
			sources:   []string{"manifests/scheduler/rbac.yaml"},
			condition: "",
			adapt:     adaptRBAC,
		},
		{
			name:      "admission-pod-placement.yaml",
			sources:   []string{"manifests/admission/pod-placement-policy.yaml"},
			condition: ".Values.admission.podPlacement",
		},
		{
			name:      "admission-gpu-pods.yaml",
			sources:   []string{"manifests/admission/gpu-pod-policy.yaml"},
			condition: ".Values.admission.gpuPods",
			adapt:     adaptAdmissionParams,
		},
		{
			name:      "admission-node-verdicts.yaml",
			sources:   []string{"manifests/admission/node-verdict-policy.yaml"},
			condition: ".Values.admission.nodeVerdicts",
		},
		{
			name:      "admission-placement-key.yaml",
			sources:   []string{"manifests/admission/scheduler-secret-policy.yaml"},
			condition: ".Values.admission.placementKey",
		},
		{
			// The roles only: the chart binds them from values and writes
			// the Service and NetworkPolicy itself (templates/inspect.yaml).
			name:      "inspect-rbac.yaml",
			sources:   []string{"manifests/inspect/rbac.yaml", "manifests/inspect/service-proxy.yaml"},
			condition: "",
			keep: func(obj map[string]any) bool {
				kind := obj["kind"]
				return kind == "ClusterRole" || kind == "Role"
			},
			adapt: adaptInspectRoles,
		},
		{
			name:      "sample-virtualclusters.yaml",
			sources:   []string{"manifests/samples/virtualclusters.yaml"},
			condition: ".Values.sampleVirtualClusters.enabled",
		},
	}
}

// adaptNamespace puts the chart's namespace where the shipped one is.
func adaptNamespace(obj map[string]any) error {
	if ns, _ := getPath(obj, "metadata", "namespace").(string); ns == shippedSchedulerNamespace {
		setPath(obj, "@@NAMESPACE@@", "metadata", "namespace")
	}
	return nil
}

// adaptInspectRoles: the reader Role in the chart's namespace, naming the
// service proxy paths of the chart's inspect port.
func adaptInspectRoles(obj map[string]any) error {
	if err := adaptNamespace(obj); err != nil {
		return err
	}
	if obj["kind"] != "Role" {
		return nil
	}
	rules, _ := obj["rules"].([]any)
	for _, r := range rules {
		rm, _ := r.(map[string]any)
		names, _ := rm["resourceNames"].([]any)
		for i, n := range names {
			if s, ok := n.(string); ok {
				names[i] = strings.ReplaceAll(s, ":"+shippedInspectPort, ":@@INSPECT_PORT@@")
			}
		}
	}
	return nil
}

// adaptRBAC: the scheduler's namespace in objects and subjects; its lease
// Role and RoleBinding (kube-system, by the role's name) in the lease's
// namespace, naming the lease. The extension-apiserver-authentication
// reader stays in kube-system, where its ConfigMap is.
func adaptRBAC(obj map[string]any) error {
	if err := adaptNamespace(obj); err != nil {
		return err
	}
	kind, _ := obj["kind"].(string)
	name, _ := getPath(obj, "metadata", "name").(string)
	ns, _ := getPath(obj, "metadata", "namespace").(string)
	if (kind == "Role" || kind == "RoleBinding") && name == schedulerRoleName && ns == shippedLeaseNamespace {
		setPath(obj, "@@LEASE_NAMESPACE@@", "metadata", "namespace")
	}
	if subjects, ok := obj["subjects"].([]any); ok {
		for _, s := range subjects {
			if sm, ok := s.(map[string]any); ok && sm["namespace"] == shippedSchedulerNamespace {
				sm["namespace"] = "@@NAMESPACE@@"
			}
		}
	}
	if rules, ok := obj["rules"].([]any); ok {
		for _, r := range rules {
			rm, _ := r.(map[string]any)
			if resources, _ := rm["resources"].([]any); len(resources) == 1 && resources[0] == "leases" {
				if _, named := rm["resourceNames"]; !named {
					return fmt.Errorf("%s %s: the lease rule names no lease", kind, name)
				}
				rm["resourceNames"] = "@@LEASE_NAMES@@"
			}
		}
	}
	return nil
}

// adaptAdmissionParams: hivesched-gpu-pods' ConfigMap and the binding's
// paramRef in the chart's parameter namespace, with the values' lists.
func adaptAdmissionParams(obj map[string]any) error {
	switch obj["kind"] {
	case "ConfigMap":
		if getPath(obj, "metadata", "name") != shippedParamsName || getPath(obj, "metadata", "namespace") != shippedParamsNamespace {
			return errors.New("gpu-pod-policy.yaml: unexpected ConfigMap")
		}
		setPath(obj, "@@PARAMS_NAMESPACE@@", "metadata", "namespace")
		data, _ := obj["data"].(map[string]any)
		if _, ok := data["leafResources"]; !ok {
			return errors.New("gpu-pod-policy.yaml: ConfigMap without leafResources")
		}
		if _, ok := data["profiles"]; !ok {
			return errors.New("gpu-pod-policy.yaml: ConfigMap without profiles")
		}
		data["leafResources"] = "@@LEAF_RESOURCES@@"
		data["profiles"] = "@@PROFILES@@"
	case "ValidatingAdmissionPolicyBinding":
		if getPath(obj, "spec", "paramRef", "namespace") == shippedParamsNamespace {
			setPath(obj, "@@PARAMS_NAMESPACE@@", "spec", "paramRef", "namespace")
		}
	}
	return nil
}

func getPath(obj map[string]any, path ...string) any {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func setPath(obj map[string]any, value any, path ...string) {
	cur := obj
	for _, p := range path[:len(path)-1] {
		next, ok := cur[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[p] = next
		}
		cur = next
	}
	cur[path[len(path)-1]] = value
}

// documents splits a YAML stream into its objects.
func documents(raw []byte) ([]map[string]any, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var objs []map[string]any
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		var obj map[string]any
		if err := sigsyaml.Unmarshal(doc, &obj); err != nil {
			return nil, err
		}
		if len(obj) > 0 {
			objs = append(objs, obj)
		}
	}
}

// render is the content of one generated template.
func render(root string, f chartFile) ([]byte, error) {
	var out bytes.Buffer
	fmt.Fprintf(&out, "{{- /* Generated by hack/chartgen from %s: do not edit; change the manifests and run go run ./hack/chartgen. */ -}}\n",
		strings.Join(f.sources, ", "))
	if f.condition != "" {
		fmt.Fprintf(&out, "{{- if %s }}\n", f.condition)
	}
	n := 0
	for _, src := range f.sources {
		raw, err := os.ReadFile(filepath.Join(root, src))
		if err != nil {
			return nil, err
		}
		// Helm would read these as template actions.
		if bytes.Contains(raw, []byte("{{")) {
			return nil, fmt.Errorf("%s contains {{, which the chart would take for a template action", src)
		}
		objs, err := documents(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		for _, obj := range objs {
			if f.keep != nil && !f.keep(obj) {
				continue
			}
			if f.adapt != nil {
				if err := f.adapt(obj); err != nil {
					return nil, fmt.Errorf("%s: %w", src, err)
				}
			}
			setPath(obj, "", "metadata", "labels", labelsKey)
			doc, err := sigsyaml.Marshal(obj)
			if err != nil {
				return nil, err
			}
			text := string(doc)
			for _, p := range placeholders {
				text = strings.ReplaceAll(text, p.placeholder, p.template)
			}
			text = labelsLine.ReplaceAllStringFunc(text, func(line string) string {
				indent := len(line) - len(strings.TrimLeft(line, " "))
				return fmt.Sprintf("%s{{- include \"hivesched.labels\" . | nindent %d }}", strings.Repeat(" ", indent), indent)
			})
			if strings.Contains(text, "@@") {
				return nil, fmt.Errorf("%s: a placeholder was left in %s", src, text)
			}
			fmt.Fprintf(&out, "---\n# From %s.\n%s", src, text)
			n++
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: no object taken from %v", f.name, f.sources)
	}
	if f.condition != "" {
		out.WriteString("{{- end }}\n")
	}
	return out.Bytes(), nil
}

func main() {
	check := flag.Bool("check", false, "compare the chart's copies with what would be written; change nothing")
	root := flag.String("root", ".", "the repository root")
	flag.Parse()
	dir := filepath.Join(*root, "manifests", "charts", "hivesched", "templates", "generated")
	stale := 0
	written := map[string]bool{}
	for _, f := range chartFiles() {
		written[f.name] = true
		want, err := render(*root, f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "chartgen:", err)
			os.Exit(1)
		}
		path := filepath.Join(dir, f.name)
		if *check {
			have, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(have, want) {
				fmt.Fprintf(os.Stderr, "chartgen: %s is not what the manifests give: run go run ./hack/chartgen\n", path)
				stale++
			}
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "chartgen:", err)
			os.Exit(1)
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "chartgen:", err)
			os.Exit(1)
		}
	}
	// A file the generator no longer writes would still be rendered.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !written[e.Name()] {
			fmt.Fprintf(os.Stderr, "chartgen: %s is not generated from any manifest: remove it\n", filepath.Join(dir, e.Name()))
			stale++
		}
	}
	if stale > 0 {
		os.Exit(1)
	}
}
