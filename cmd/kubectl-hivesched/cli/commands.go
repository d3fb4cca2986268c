package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
)

// NewCommand is `kubectl hivesched`.
func NewCommand(out, errOut io.Writer) *cobra.Command {
	o := &options{kube: genericclioptions.NewConfigFlags(true), errOut: errOut}
	root := &cobra.Command{
		Use:   "kubectl-hivesched",
		Short: "See hivesched's cells, virtual clusters and affinity groups",
		Long: `kubectl hivesched reads the hivesched scheduler's read-only inspect API
(docs/inspect.md): through the API server's service proxy with your
kubeconfig (manifests/inspect/service-proxy.yaml), or directly with
--inspect-url (for example after kubectl -n hivesched-system port-forward
deploy/hivesched-scheduler 10262:10262), or from a saved answer with
--from-file. The API authenticates you by your kubeconfig's bearer token
(or --token) and shows what RBAC lets you see (docs/inspect.md).
"kubectl hivesched dashboard" serves its web page on this machine.`,
		SilenceUsage: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	pf := root.PersistentFlags()
	o.kube.AddFlags(pf)
	pf.StringVar(&o.inspectURL, "inspect-url", "", "read the inspect API at this URL (http://127.0.0.1:10262) instead of through the API server")
	pf.StringVar(&o.fromFile, "from-file", "", "read a saved answer of the inspect API (JSON) instead of asking the scheduler")
	pf.StringVar(&o.namespace, "scheduler-namespace", "hivesched-system", "namespace of the scheduler's inspect Service")
	pf.StringVar(&o.service, "scheduler-service", "hivesched-inspect", "name of the scheduler's inspect Service")
	pf.IntVar(&o.port, "scheduler-port", 10262, "port of the scheduler's inspect Service")
	pf.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for the answer")
	root.AddCommand(cellsCommand(o), whyCommand(o), vcsCommand(o), groupsCommand(o), dashboardCommand(o))
	return root
}

func cellsCommand(o *options) *cobra.Command {
	var vc, node, output, outFile string
	cmd := &cobra.Command{
		Use:   "cells [--vc NAME] [--node NAME] [-o text|json|svg|png] [--out FILE]",
		Short: "The physical cell tree: per cell its state, health, VC binding and the group using it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			src, err := o.source()
			if err != nil {
				return err
			}
			q := url.Values{}
			if vc != "" {
				q.Set("vc", vc)
			}
			if node != "" {
				q.Set("node", node)
			}
			path := "cells"
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			ctx := cmd.Context()
			var cells iv1.ClusterCells
			if err := fetch(ctx, src, path, &cells); err != nil {
				return err
			}
			w, closeOut, err := output_(cmd.OutOrStdout(), outFile)
			if err != nil {
				return err
			}
			defer closeOut()
			switch output {
			case "text", "":
				return writeCells(w, &cells)
			case "json":
				return writeJSON(w, &cells)
			case "svg", "png":
				groups := groupVCs(ctx, src, o)
				pic := layoutPicture(&cells, groups)
				if output == "svg" {
					return pic.writeSVG(w)
				}
				return pic.writePNG(w)
			}
			return fmt.Errorf("-o %q: want text, json, svg or png", output)
		},
	}
	cmd.Flags().StringVar(&vc, "vc", "", "only the cells bound to this virtual cluster (and their ancestors)")
	cmd.Flags().StringVar(&node, "node", "", "only this node's cells (and their ancestors)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text, json, svg or png")
	cmd.Flags().StringVar(&outFile, "out", "", "write to this file instead of standard output")
	return cmd
}

// groupVCs maps each group to its VC, to colour opportunistic use (which
// runs on cells not bound to its VC). Without it (a saved cells file) such
// cells get a neutral colour.
func groupVCs(ctx context.Context, src source, o *options) map[string]string {
	if o.fromFile != "" {
		return nil
	}
	var groups []iv1.AffinityGroup
	if err := fetch(ctx, src, "affinitygroups", &groups); err != nil {
		return nil
	}
	m := make(map[string]string, len(groups))
	for _, g := range groups {
		m[g.Name] = g.VirtualCluster
	}
	return m
}

func whyCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "why POD",
		Short: "Why a pod waits (or where it runs): its group, what it needs, who holds the cells, what would free them",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := o.source()
			if err != nil {
				return err
			}
			ns, _, err := o.kube.ToRawKubeConfigLoader().Namespace()
			if err != nil || ns == "" {
				ns = "default"
			}
			name := args[0]
			if n, p, ok := strings.Cut(name, "/"); ok {
				ns, name = n, p
			}
			var ex iv1.PodExplanation
			if err := fetch(cmd.Context(), src, "pods/"+url.PathEscape(ns)+"/"+url.PathEscape(name), &ex); err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), &ex)
			}
			return writeWhy(cmd.OutOrStdout(), &ex)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func vcsCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "vcs [NAME]",
		Aliases: []string{"virtualclusters"},
		Short:   "Virtual clusters: leaf cells total, used, free, opportunistic; groups; virtual cells and their physical cells",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := o.source()
			if err != nil {
				return err
			}
			var vcs []iv1.VirtualCluster
			if len(args) == 1 {
				var one iv1.VirtualCluster
				if err := fetch(cmd.Context(), src, "virtualclusters/"+url.PathEscape(args[0]), &one); err != nil {
					return err
				}
				vcs = append(vcs, one)
			} else if err := fetch(cmd.Context(), src, "virtualclusters", &vcs); err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), vcs)
			}
			return writeVCs(cmd.OutOrStdout(), vcs, len(args) == 1)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func groupsCommand(o *options) *cobra.Command {
	var output, vc string
	cmd := &cobra.Command{
		Use:   "groups [--vc NAME]",
		Short: "Affinity groups: VC, state, priority, pods and where they run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			src, err := o.source()
			if err != nil {
				return err
			}
			var groups []iv1.AffinityGroup
			if err := fetch(cmd.Context(), src, "affinitygroups", &groups); err != nil {
				return err
			}
			if vc != "" {
				kept := groups[:0]
				for _, g := range groups {
					if g.VirtualCluster == vc {
						kept = append(kept, g)
					}
				}
				groups = kept
			}
			if output == "json" {
				return writeJSON(cmd.OutOrStdout(), groups)
			}
			return writeGroups(cmd.OutOrStdout(), groups)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	cmd.Flags().StringVar(&vc, "vc", "", "only this virtual cluster's groups")
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// output_ is standard output, or file when one is named.
func output_(stdout io.Writer, file string) (io.Writer, func(), error) {
	if file == "" {
		return stdout, func() {}, nil
	}
	f, err := os.Create(file)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { _ = f.Close() }, nil
}
