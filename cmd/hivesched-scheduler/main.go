// Command hivesched-scheduler is kube-scheduler with the HiveSched plugin
// compiled in. Configure it with a KubeSchedulerConfiguration that enables
// the plugin (manifests/scheduler/config-*.yaml); every kube-scheduler flag
// works as usual, and as in kube-scheduler the API server comes from the
// configuration's clientConnection.kubeconfig (--kubeconfig is ignored when
// --config is given). The version is stamped at build time (make build).
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"sigs.k8s.io/yaml"

	// Registers HiveSchedArgs in the scheduler's configuration scheme.
	_ "github.com/hivesched/hivesched/apis/config/scheme"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

func main() {
	command := app.NewSchedulerCommand(app.WithPlugin(hivesched.Name, hivesched.New), app.WithPlugin(hivesched.DRAName, hivesched.NewDRA),
		app.WithPlugin(hivesched.PreemptionName, hivesched.NewPreemption))
	run := command.RunE
	command.RunE = func(cmd *cobra.Command, args []string) error {
		// With leader election, HiveSched rebuilds its state when this
		// process starts leading, not at start: a standby's view would
		// miss what the leader places meanwhile.
		le, err := leaderElect(cmd)
		if err != nil {
			return err
		}
		hivesched.AwaitLeadership(le)
		return run(cmd, args)
	}
	os.Exit(cli.Run(command))
}

// leaderElect reads whether leader election is on as kube-scheduler does:
// from the --config file when one is given (leaderElection.leaderElect,
// true when absent), else from the --leader-elect flag.
func leaderElect(cmd *cobra.Command) (bool, error) {
	if f := cmd.Flags().Lookup("config"); f != nil && f.Value.String() != "" {
		data, err := os.ReadFile(f.Value.String())
		if err != nil {
			return false, err
		}
		var cfg struct {
			LeaderElection struct {
				LeaderElect *bool `json:"leaderElect"`
			} `json:"leaderElection"`
		}
		if err := yaml.Unmarshal(data, &cfg); err != nil {
			return false, fmt.Errorf("reading %s: %w", f.Value.String(), err)
		}
		return cfg.LeaderElection.LeaderElect == nil || *cfg.LeaderElection.LeaderElect, nil
	}
	if f := cmd.Flags().Lookup("leader-elect"); f != nil {
		return f.Value.String() == "true", nil
	}
	return true, nil
}
