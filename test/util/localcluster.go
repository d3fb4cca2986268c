package util

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The local cluster of hack/local-up.sh takes its ports (and feature gates)
// from HIVESCHED_* environment variables (hack/local-env.sh) and records
// those of the running cluster in _output/local/cluster.env (or
// $HIVESCHED_LOCAL_DIR/cluster.env). Tests read them
// from there rather than hard-coding the defaults, so that they follow a
// cluster started with, for example, HIVESCHED_PORT_OFFSET=1000.

// LocalDir is the local cluster's directory for the checkout at root:
// $HIVESCHED_LOCAL_DIR if set (hack/local-env.sh), else root/_output/local.
func LocalDir(root string) string {
	if d := os.Getenv("HIVESCHED_LOCAL_DIR"); d != "" {
		return d
	}
	return filepath.Join(root, "_output", "local")
}

// LocalClusterEnv returns the settings of the local cluster running from
// the checkout at root (LocalDir), keyed by variable name
// (HIVESCHED_APISERVER_PORT, HIVESCHED_FEATURE_GATES, ...).
func LocalClusterEnv(root string) (map[string]string, error) {
	path := filepath.Join(LocalDir(root), "cluster.env")
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("no local cluster settings (%w): bring the cluster up with make up", err)
	}
	defer func() { _ = f.Close() }()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && strings.HasPrefix(k, "HIVESCHED_") {
			out[k] = v
		}
	}
	return out, sc.Err()
}

// LocalPort returns the local cluster's port name, as hack/local-env.sh
// names it without its prefix: "APISERVER_PORT", "INSPECT_PORT", ...
func LocalPort(root, name string) (int, error) {
	env, err := LocalClusterEnv(root)
	if err != nil {
		return 0, err
	}
	v, ok := env["HIVESCHED_"+name]
	if !ok {
		return 0, fmt.Errorf("the local cluster's settings have no HIVESCHED_%s", name)
	}
	return strconv.Atoi(v)
}

// LocalFeatureGate reports whether the local cluster runs with feature gate
// name turned on (its HIVESCHED_FEATURE_GATES list, given to kube-apiserver,
// kube-controller-manager and the scheduler alike).
func LocalFeatureGate(root, name string) (bool, error) {
	env, err := LocalClusterEnv(root)
	if err != nil {
		return false, err
	}
	for _, g := range strings.Split(env["HIVESCHED_FEATURE_GATES"], ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(g), "=")
		if k == name {
			return strconv.ParseBool(v)
		}
	}
	return false, nil
}

// LocalClusterShape is the local cluster's shape (HIVESCHED_CLUSTER of
// hack/local-env.sh): "sample" or "gb200".
func LocalClusterShape(root string) (string, error) {
	env, err := LocalClusterEnv(root)
	if err != nil {
		return "", err
	}
	if s := env["HIVESCHED_CLUSTER"]; s != "" {
		return s, nil
	}
	return "sample", nil
}
