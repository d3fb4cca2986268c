package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/hivesched/hivesched/apis/config"
	_ "github.com/hivesched/hivesched/apis/config/scheme" // HiveSchedArgs in kube-scheduler's config scheme
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/cellspec"
)

// LoadCluster reads the physical cluster from a scheduler configuration,
// the file the scheduler itself reads (--config), through kube-scheduler's
// own loader.
func LoadCluster(path string) (cellcore.Config, error) {
	cfg, err := options.LoadConfigFromFile(klog.Background(), path)
	if err != nil {
		return cellcore.Config{}, err
	}
	for _, prof := range cfg.Profiles {
		for _, pc := range prof.PluginConfig {
			if a, ok := pc.Args.(*config.HiveSchedArgs); ok && pc.Name == config.PluginName {
				return cellspec.Config(a.PhysicalCluster), nil
			}
		}
	}
	return cellcore.Config{}, fmt.Errorf("%s: no profile configures the %s plugin's physicalCluster", path, config.PluginName)
}

// LoadVirtualClusters reads VirtualCluster objects (YAML documents or a
// List), as kubectl apply would take them.
func LoadVirtualClusters(path string) ([]cellcore.VirtualClusterSpec, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []cellcore.VirtualClusterSpec
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if obj == nil {
			continue
		}
		items := []any{obj}
		if strings.HasSuffix(fmt.Sprint(obj["kind"]), "List") {
			items, _ = obj["items"].([]any)
		}
		for _, it := range items {
			b, _ := json.Marshal(it)
			var vc hv1.VirtualCluster
			if err := sigsyaml.UnmarshalStrict(b, &vc); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			if vc.Kind != "VirtualCluster" {
				return nil, fmt.Errorf("%s: a %s, not a VirtualCluster", path, vc.Kind)
			}
			out = append(out, cellspec.VirtualCluster(&vc))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no VirtualCluster", path)
	}
	return out, nil
}

// LoadGenerator reads a generator's settings (YAML or JSON).
func LoadGenerator(path string) (Generator, error) {
	var g Generator
	raw, err := os.ReadFile(path)
	if err != nil {
		return g, err
	}
	if err := sigsyaml.UnmarshalStrict(raw, &g); err != nil {
		return g, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}
