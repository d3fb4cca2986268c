// Command kubectl-hivesched is a kubectl plugin (kubectl hivesched ...) that
// shows hivesched's cells, virtual clusters and affinity groups from the
// scheduler's read-only inspect API (docs/inspect.md).
package main

import (
	"os"

	"github.com/hivesched/hivesched/cmd/kubectl-hivesched/cli"
)

func main() {
	if err := cli.NewCommand(os.Stdout, os.Stderr).Execute(); err != nil {
		os.Exit(1)
	}
}
