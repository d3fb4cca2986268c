// Command hived-convert turns the virtualClusters section of a HiveD
// scheduler configuration into VirtualCluster objects (hivesched.io/v1alpha1),
// as YAML documents on stdout for kubectl apply -f -:
//
//	hived-convert [-allowed-namespaces=ns1,ns2] hivedscheduler.yaml > vcs.yaml
//
// ("-" or no file reads stdin). HiveD's physicalCluster section needs no
// conversion: it is HiveSched's physicalCluster argument as it is.
//
// A HiveD name that is not a Kubernetes object name (an RFC 1123 subdomain:
// lowercase letters, digits, '-' and '.') is renamed, "VC1" to "vc1" and
// "vc_a" to "vc-a", and said so on stderr: the pods must then name the new
// name. A renamed VirtualCluster keeps its HiveD name in the annotation
// hivesched.io/hived-name, and a pod that names the old one is told which
// VirtualCluster to name. HiveD has no namespace access control, so every VC
// admits every namespace ("*") unless -allowed-namespaces says otherwise.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
)

func main() {
	fs := flag.NewFlagSet("hived-convert", flag.ContinueOnError)
	namespaces := fs.String("allowed-namespaces", hv1.AllNamespaces,
		`comma-separated namespaces whose pods may use the VCs ("*": all, as in HiveD)`)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: hived-convert [-allowed-namespaces=ns1,ns2] [HIVED-CONFIG.yaml|-]\n"+
			"Writes the VirtualClusters of HiveD's virtualClusters section to stdout.\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if fs.NArg() > 1 {
		fs.Usage()
		os.Exit(2)
	}
	var in io.Reader = os.Stdin
	name := "stdin"
	if fs.NArg() == 1 && fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(os.Stderr, "hived-convert: %v\n", err)
			os.Exit(1)
		}
		defer f.Close()
		in, name = f, fs.Arg(0)
	}
	raw, err := io.ReadAll(in)
	if err != nil {
		fmt.Fprintf(os.Stderr, "hived-convert: reading %s: %v\n", name, err)
		os.Exit(1)
	}
	out, notes, err := convert(raw, splitNamespaces(*namespaces))
	for _, n := range notes {
		fmt.Fprintf(os.Stderr, "hived-convert: %s\n", n)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "hived-convert: %s: %v\n", name, err)
		os.Exit(1)
	}
	if _, err := os.Stdout.Write(out); err != nil {
		os.Exit(1)
	}
}

func splitNamespaces(s string) []string {
	var out []string
	for _, ns := range strings.Split(s, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

// hivedVirtualCluster is one entry of HiveD's virtualClusters section.
type hivedVirtualCluster struct {
	VirtualCells []struct {
		CellType   string `json:"cellType"`
		CellNumber int32  `json:"cellNumber"`
	} `json:"virtualCells"`
	PinnedCells []struct {
		PinnedCellID string `json:"pinnedCellId"`
	} `json:"pinnedCells"`
}

// virtualCluster is the object written out: only what a user writes (no
// status, no creationTimestamp).
type virtualCluster struct {
	APIVersion string                 `json:"apiVersion"`
	Kind       string                 `json:"kind"`
	Metadata   metadata               `json:"metadata"`
	Spec       hv1.VirtualClusterSpec `json:"spec"`
}

type metadata struct {
	Name        string            `json:"name"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// convert returns the VirtualClusters of a HiveD configuration's
// virtualClusters section as YAML documents (sorted by name), and notes for
// the user (renamed VCs, the namespaces they admit).
func convert(raw []byte, namespaces []string) ([]byte, []string, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("not valid YAML: %v", err)
	}
	var top struct {
		VirtualClusters map[string]json.RawMessage `json:"virtualClusters"`
	}
	if err := json.Unmarshal(js, &top); err != nil {
		return nil, nil, fmt.Errorf("not a HiveD configuration: %v", err)
	}
	if len(top.VirtualClusters) == 0 {
		return nil, nil, fmt.Errorf("no virtualClusters section (or it is empty): nothing to convert")
	}
	if len(namespaces) == 0 {
		return nil, nil, fmt.Errorf("-allowed-namespaces is empty: a VirtualCluster must admit some namespace (\"*\" for all)")
	}
	for _, ns := range namespaces {
		if ns == hv1.AllNamespaces {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, nil, fmt.Errorf("-allowed-namespaces: %q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
	}
	names := make([]string, 0, len(top.VirtualClusters))
	for n := range top.VirtualClusters {
		names = append(names, n)
	}
	sort.Strings(names)

	var notes []string
	var buf bytes.Buffer
	from := map[string]string{} // Kubernetes name -> HiveD name
	for _, hivedName := range names {
		var vc hivedVirtualCluster
		dec := json.NewDecoder(bytes.NewReader(top.VirtualClusters[hivedName]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&vc); err != nil {
			return nil, notes, fmt.Errorf("virtualClusters.%s: %v (a HiveD VC has virtualCells and pinnedCells)", hivedName, err)
		}
		name, err := kubeName(hivedName)
		if err != nil {
			return nil, notes, fmt.Errorf("virtualClusters.%s: %v", hivedName, err)
		}
		if other, taken := from[name]; taken {
			return nil, notes, fmt.Errorf("virtual clusters %q and %q both become VirtualCluster %q: rename one in the HiveD configuration first", other, hivedName, name)
		}
		from[name] = hivedName
		obj := virtualCluster{APIVersion: hv1.SchemeGroupVersion.String(), Kind: "VirtualCluster", Metadata: metadata{Name: name}}
		if name != hivedName {
			obj.Metadata.Annotations = map[string]string{hv1.AnnotationHivedName: hivedName}
			notes = append(notes, fmt.Sprintf("virtual cluster %q becomes VirtualCluster %q (Kubernetes names are lowercase RFC 1123 subdomains): its pods must name virtualCluster: %s", hivedName, name, name))
		}
		for i, c := range vc.VirtualCells {
			if c.CellType == "" || c.CellNumber < 0 {
				return nil, notes, fmt.Errorf("virtualClusters.%s.virtualCells[%d]: needs a cellType and a cellNumber of at least 0", hivedName, i)
			}
			obj.Spec.VirtualCells = append(obj.Spec.VirtualCells, hv1.VirtualCellSpec{CellType: c.CellType, CellNumber: c.CellNumber})
		}
		for i, c := range vc.PinnedCells {
			if c.PinnedCellID == "" {
				return nil, notes, fmt.Errorf("virtualClusters.%s.pinnedCells[%d]: pinnedCellId is empty", hivedName, i)
			}
			obj.Spec.PinnedCells = append(obj.Spec.PinnedCells, hv1.PinnedCellSpec{PinnedCellID: c.PinnedCellID})
		}
		obj.Spec.AllowedNamespaces = namespaces
		doc, err := yaml.Marshal(obj)
		if err != nil {
			return nil, notes, err
		}
		buf.WriteString("---\n")
		buf.Write(doc)
	}
	if len(namespaces) == 1 && namespaces[0] == hv1.AllNamespaces {
		notes = append(notes, `every VirtualCluster admits pods of all namespaces (allowedNamespaces: ["*"]), as HiveD does: -allowed-namespaces restricts them`)
	}
	return buf.Bytes(), notes, nil
}

// kubeName turns a HiveD VC name into a Kubernetes object name (an RFC 1123
// subdomain): lowercase, and '-' for every character a name may not hold.
func kubeName(hived string) (string, error) {
	if len(validation.IsDNS1123Subdomain(hived)) == 0 {
		return hived, nil
	}
	b := []byte(strings.ToLower(hived))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '.' {
			b[i] = '-'
		}
	}
	name := strings.Trim(string(b), "-.")
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", fmt.Errorf("%q cannot be made a Kubernetes name (tried %q: %s): rename it in the HiveD configuration", hived, name, strings.Join(errs, "; "))
	}
	return name, nil
}
