package conformance

import (
	"flag"
	"os"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	e2enode "k8s.io/kubernetes/test/e2e/framework/node"
	e2epod "k8s.io/kubernetes/test/e2e/framework/pod"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	e2etestingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	testfixtures "k8s.io/kubernetes/test/fixtures"

	// The framework's own initialisers (debug dumps, metrics, node
	// checks), as Kubernetes' e2e binary has them.
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"

	// The specs: Kubernetes' [sig-scheduling] suite, and nothing else.
	_ "k8s.io/kubernetes/test/e2e/scheduling"
)

// The e2e binary of make conformance: Kubernetes' [sig-scheduling] specs
// (test/e2e/scheduling) run by its e2e framework, with the same flags as
// its e2e.test. Kubernetes' own binary (k8s.io/kubernetes/test/e2e) links
// every SIG's specs, twice the packages to build (about 14 minutes cold on
// two cores) for specs the focus would skip anyway.

func TestMain(m *testing.M) {
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	testfiles.AddFileSource(e2etestingmanifests.GetE2ETestingManifestsFS())
	testfiles.AddFileSource(testfixtures.GetTestFixturesFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

func TestSchedulingSpecs(t *testing.T) {
	logs.InitLogs()
	defer logs.FlushLogs()
	klog.EnableContextualLogging(true)
	gomega.RegisterFailHandler(framework.Fail)
	suiteConfig, reporterConfig := framework.CreateGinkgoConfig()
	registerBetweenSpecs()
	ginkgo.RunSpecs(t, "Kubernetes e2e suite: [sig-scheduling]", suiteConfig, reporterConfig)
}

// Before the specs, what Kubernetes' suite checks of the cluster and
// records for its specs: every node schedulable, the number of ready
// schedulable nodes (specs size their pods by it), kube-system's pods
// running and ready, and the cluster's IP family; and the nodes' snapshot
// every spec is checked against (hygiene_test.go).
var _ = ginkgo.SynchronizedBeforeSuite(func(ctx ginkgo.SpecContext) []byte {
	c, err := framework.LoadClientset()
	framework.ExpectNoError(err, "loading the client")
	timeouts := framework.NewTimeoutContext()
	framework.ExpectNoError(e2enode.WaitForAllNodesSchedulable(ctx, c, timeouts.NodeSchedulable))
	if err := e2epod.WaitForAlmostAllPodsReady(ctx, c, metav1.NamespaceSystem, framework.TestContext.MinStartupPods,
		framework.TestContext.AllowedNotReadyNodes, timeouts.SystemPodsStartup); err != nil {
		framework.Failf("kube-system's pods are not running and ready: %v", err)
	}
	return nil
}, func(ctx ginkgo.SpecContext, _ []byte) {
	c, err := framework.LoadClientset()
	framework.ExpectNoError(err, "loading the client")
	if framework.TestContext.CloudConfig.NumNodes == framework.DefaultNumNodes {
		nodes, err := e2enode.GetReadySchedulableNodes(ctx, c)
		framework.ExpectNoError(err)
		framework.TestContext.CloudConfig.NumNodes = len(nodes.Items)
	}
	framework.TestContext.IPFamily = "ipv4"
	if svc, err := c.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{}); err == nil && len(svc.Spec.IPFamilies) > 0 && svc.Spec.IPFamilies[0] == "IPv6" {
		framework.TestContext.IPFamily = "ipv6"
	}
	framework.Logf("nodes: %d, cluster IP family: %s", framework.TestContext.CloudConfig.NumNodes, framework.TestContext.IPFamily)
	// What every spec must find as the first did (hygiene_test.go).
	snapshotNodes(ctx, c)
	framework.Logf("ginkgo random seed: %d", ginkgo.GinkgoRandomSeed())
})
