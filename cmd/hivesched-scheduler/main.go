// Command hivesched-scheduler is kube-scheduler with the HiveSched plugin
// compiled in. Configure it with a KubeSchedulerConfiguration that enables
// the plugin (manifests/scheduler/config-*.yaml); every kube-scheduler flag
// works as usual, and as in kube-scheduler the API server comes from the
// configuration's clientConnection.kubeconfig (--kubeconfig is ignored when
// --config is given). The version is stamped at build time (make build).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	// Registers HiveSchedArgs in the scheduler's configuration scheme.
	_ "github.com/hivesched/hivesched/apis/config/scheme"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

func main() {
	command := app.NewSchedulerCommand(app.WithPlugin(hivesched.Name, hivesched.New))
	os.Exit(cli.Run(command))
}
