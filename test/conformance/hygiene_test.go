package conformance

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/kubernetes/test/e2e/framework"
)

// Order independence (issue 44). Kubernetes' e2e framework deletes a spec's
// namespace when the spec ends and does not wait for it (it waits only for
// namespaces named e2e-tests-*), and the namespace controller leaves the
// namespace's pods alone for 5 s (namespaceDeletionGracePeriod, a constant
// kept for HA API servers) before it deletes them. So the next spec started
// with the previous spec's pods still bound and holding their nodes'
// resources: "validates basic preemption works" run right after "validates
// lower priority pod preemption by critical pod" found 2 of gpu-a0's 5
// scheduling.k8s.io/foo taken by a pod of the critical-pod spec's
// namespace, preempted its own first pod and timed out, on both profiles.
//
// Before every spec, this suite therefore
//   - deletes the pods of namespaces being deleted (what the namespace
//     controller does 5 s later anyway) and waits, bounded by
//     lingerTimeout, until no pod of a namespace being deleted and no pod
//     being deleted is left anywhere; past the bound the spec fails, naming
//     them and the spec that ran before;
//   - compares every node with the snapshot taken before the first spec
//     (labels, taints, extended resources in capacity and allocatable) and
//     restores what differs, logging it and adding a report entry to the
//     spec, with the name of the spec that ran before.
// Namespaces themselves may still be Terminating after their pods are gone
// (the namespace controller looks again estimate/2+1 s later, 16 s for pods
// of the default 30 s grace period): nothing the scheduler sees is left in
// them, and waiting for them would cost about 16 s a spec.

// lingerTimeout bounds the wait for the previous specs' pods: longer than
// any grace period the specs give their pods (the async preemption spec's
// victims stay 80 s with their preStop hook).
const lingerTimeout = 3 * time.Minute

// nodeState is what the suite keeps of a node: what specs change and must
// undo.
type nodeState struct {
	labels      map[string]string
	taints      []v1.Taint
	capacity    v1.ResourceList
	allocatable v1.ResourceList
}

var (
	// nodeSnapshot: every node as the first spec found it (set in the
	// before-suite of every process).
	nodeSnapshot map[string]nodeState
	// previousSpec: the spec that ran last in this process, for the
	// messages.
	previousSpec = "(none: the first spec)"
)

func stateOf(n *v1.Node) nodeState {
	s := nodeState{
		labels:      map[string]string{},
		capacity:    v1.ResourceList{},
		allocatable: v1.ResourceList{},
	}
	for k, v := range n.Labels {
		s.labels[k] = v
	}
	for _, t := range n.Spec.Taints {
		t.TimeAdded = nil
		s.taints = append(s.taints, t)
	}
	for name, q := range n.Status.Capacity {
		if v1helper.IsExtendedResourceName(name) {
			s.capacity[name] = q.DeepCopy()
		}
	}
	for name, q := range n.Status.Allocatable {
		if v1helper.IsExtendedResourceName(name) {
			s.allocatable[name] = q.DeepCopy()
		}
	}
	return s
}

// snapshotNodes records every node's state before the first spec.
func snapshotNodes(ctx context.Context, c clientset.Interface) {
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	framework.ExpectNoError(err, "listing the nodes for the snapshot")
	nodeSnapshot = map[string]nodeState{}
	for i := range nodes.Items {
		nodeSnapshot[nodes.Items[i].Name] = stateOf(&nodes.Items[i])
	}
	framework.Logf("node snapshot: %d nodes (labels, taints, extended resources)", len(nodeSnapshot))
}

// mapDiff describes how got differs from want, key by key.
func mapDiff[V any](what string, want, got map[string]V, eq func(a, b V) bool) []string {
	var out []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s %s removed (was %v)", what, k, w))
		case !eq(g, w):
			out = append(out, fmt.Sprintf("%s %s=%v (was %v)", what, k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("%s %s=%v added", what, k, g))
		}
	}
	sort.Strings(out)
	return out
}

func resourceMap(l v1.ResourceList) map[string]string {
	m := map[string]string{}
	for k, q := range l {
		m[string(k)] = q.String()
	}
	return m
}

func taintMap(ts []v1.Taint) map[string]string {
	m := map[string]string{}
	for _, t := range ts {
		m[t.Key+":"+string(t.Effect)] = t.Value
	}
	return m
}

func sameString(a, b string) bool { return a == b }

// nodeDiff: how node n differs from its snapshot s.
func nodeDiff(s nodeState, n *v1.Node) []string {
	got := stateOf(n)
	var out []string
	out = append(out, mapDiff("label", s.labels, got.labels, sameString)...)
	out = append(out, mapDiff("taint", taintMap(s.taints), taintMap(got.taints), sameString)...)
	out = append(out, mapDiff("capacity", resourceMap(s.capacity), resourceMap(got.capacity), sameString)...)
	out = append(out, mapDiff("allocatable", resourceMap(s.allocatable), resourceMap(got.allocatable), sameString)...)
	return out
}

// restoreNode puts node name's labels, taints and extended resources back
// as in its snapshot s.
func restoreNode(ctx context.Context, c clientset.Interface, name string, s nodeState) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got := stateOf(n)
		if equality.Semantic.DeepEqual(got.labels, s.labels) && equality.Semantic.DeepEqual(taintMap(got.taints), taintMap(s.taints)) {
			return nil
		}
		n.Labels = map[string]string{}
		for k, v := range s.labels {
			n.Labels[k] = v
		}
		// Keep TimeAdded of the taints that were there.
		was := map[string]v1.Taint{}
		for _, t := range n.Spec.Taints {
			was[t.Key+":"+string(t.Effect)] = t
		}
		n.Spec.Taints = nil
		for _, t := range s.taints {
			if w, ok := was[t.Key+":"+string(t.Effect)]; ok && w.Value == t.Value {
				t = w
			}
			n.Spec.Taints = append(n.Spec.Taints, t)
		}
		_, err = c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("restoring node %s's labels and taints: %w", name, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got := stateOf(n)
		if equality.Semantic.DeepEqual(resourceMap(got.capacity), resourceMap(s.capacity)) &&
			equality.Semantic.DeepEqual(resourceMap(got.allocatable), resourceMap(s.allocatable)) {
			return nil
		}
		restore := func(l v1.ResourceList, want v1.ResourceList) v1.ResourceList {
			if l == nil {
				l = v1.ResourceList{}
			}
			for k := range l {
				if v1helper.IsExtendedResourceName(k) {
					delete(l, k)
				}
			}
			for k, q := range want {
				l[k] = q.DeepCopy()
			}
			return l
		}
		n.Status.Capacity = restore(n.Status.Capacity, s.capacity)
		n.Status.Allocatable = restore(n.Status.Allocatable, s.allocatable)
		_, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("restoring node %s's extended resources: %w", name, err)
	}
	return nil
}

// lingering lists the pods a previous spec left: pods being deleted, and
// pods of namespaces being deleted; it deletes the latter (gracefully, as
// the namespace controller would) when del is true. It also returns the
// namespaces still Terminating.
func lingering(ctx context.Context, c clientset.Interface, del bool) (pods, namespaces []string, err error) {
	nsList, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	terminating := map[string]bool{}
	for _, ns := range nsList.Items {
		if ns.DeletionTimestamp != nil {
			terminating[ns.Name] = true
			namespaces = append(namespaces, ns.Name)
		}
	}
	podList, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	toDelete := map[string]bool{}
	for i := range podList.Items {
		p := &podList.Items[i]
		switch {
		case p.DeletionTimestamp != nil:
			pods = append(pods, fmt.Sprintf("%s/%s (node %q, being deleted since %s, finalizers %v)",
				p.Namespace, p.Name, p.Spec.NodeName, p.DeletionTimestamp.UTC().Format(time.RFC3339), p.Finalizers))
		case terminating[p.Namespace]:
			pods = append(pods, fmt.Sprintf("%s/%s (node %q, its namespace being deleted)", p.Namespace, p.Name, p.Spec.NodeName))
			toDelete[p.Namespace] = true
		}
	}
	if del {
		// As the namespace controller does, 5 s later: one collection
		// delete of the namespace's pods, each with its grace period.
		for ns := range toDelete {
			if err := c.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return nil, nil, fmt.Errorf("deleting the pods of namespace %s, being deleted: %w", ns, err)
			}
		}
	}
	sort.Strings(pods)
	sort.Strings(namespaces)
	return pods, namespaces, nil
}

// registerBetweenSpecs adds betweenSpecs before every spec: a top-level
// BeforeEach, which runs before the specs' own BeforeEach and before the
// framework creates the spec's namespace. Called from TestSchedulingSpecs
// just before RunSpecs, not at package init: ginkgo's Suite.Clone keeps the
// top-level containers but not the top-level setup nodes, and the
// framework's AfterReadingAllFlags (ginkgo.PreviewSpecs) leaves the suite
// replaced by such a clone, so a "var _ = ginkgo.BeforeEach" never ran.
func registerBetweenSpecs() {
	ginkgo.BeforeEach(betweenSpecs)
}

// betweenSpecs: the wait and the node check above.
// CONFORMANCE_HYGIENE=0 turns it off, to show what it prevents
// (docs/conformance.md).
func betweenSpecs(ctx ginkgo.SpecContext) {
	defer func() { previousSpec = ginkgo.CurrentSpecReport().FullText() }()
	if os.Getenv("CONFORMANCE_HYGIENE") == "0" {
		framework.Logf("CONFORMANCE_HYGIENE=0: not waiting for the previous spec's pods, not checking the nodes")
		return
	}
	c, err := framework.LoadClientset()
	framework.ExpectNoError(err, "loading the client")
	start := time.Now()

	// The previous specs' pods: gone before this spec starts.
	var pods, namespaces []string
	first := true
	for {
		pods, namespaces, err = lingering(ctx, c, first)
		framework.ExpectNoError(err, "listing the pods a previous spec may have left")
		if len(pods) == 0 {
			break
		}
		if first {
			framework.Logf("waiting for %d pod(s) left by the previous spec (%s): %s", len(pods), previousSpec, strings.Join(pods, "; "))
			first = false
		}
		if time.Since(start) > lingerTimeout {
			framework.Failf("%d pod(s) left by the specs before this one (the last: %s) were still there after %v: %s",
				len(pods), previousSpec, lingerTimeout, strings.Join(pods, "; "))
		}
		select {
		case <-ctx.Done():
			framework.Failf("waiting for the pods the previous spec (%s) left: %v", previousSpec, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if !first {
		framework.Logf("the previous spec's pods were gone after %v", time.Since(start).Round(time.Millisecond))
		ginkgo.AddReportEntry("waited for pods of the previous spec", fmt.Sprintf("%s: %v", previousSpec, time.Since(start).Round(time.Millisecond)))
	}
	if len(namespaces) > 0 {
		framework.Logf("namespaces still terminating (no pods left in them): %s", strings.Join(namespaces, ", "))
	}

	// The nodes as the first spec found them.
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	framework.ExpectNoError(err, "listing the nodes")
	seen := map[string]bool{}
	var leaks []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		seen[n.Name] = true
		s, ok := nodeSnapshot[n.Name]
		if !ok {
			leaks = append(leaks, fmt.Sprintf("node %s added", n.Name))
			continue
		}
		if d := nodeDiff(s, n); len(d) > 0 {
			leaks = append(leaks, fmt.Sprintf("node %s: %s", n.Name, strings.Join(d, ", ")))
			framework.ExpectNoError(restoreNode(ctx, c, n.Name, s))
		}
	}
	for name := range nodeSnapshot {
		if !seen[name] {
			leaks = append(leaks, fmt.Sprintf("node %s removed", name))
		}
	}
	if len(leaks) > 0 {
		sort.Strings(leaks)
		msg := fmt.Sprintf("left by a previous spec (the last: %s), restored: %s", previousSpec, strings.Join(leaks, "; "))
		framework.Logf("LEFTOVER %s", msg)
		ginkgo.AddReportEntry("node state left by a previous spec", msg)
	}
}
