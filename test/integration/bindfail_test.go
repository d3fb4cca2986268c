package integration

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
)

// refuseBindings makes the API server refuse the binding of every pod whose
// name starts with prefix (a ValidatingAdmissionPolicy on pods/binding: a
// real refusal of the real call, as an admission webhook or a node
// restriction would give), waits until it is enforced, and returns a
// function that lifts it and waits until bindings pass again.
func (c *cluster) refuseBindings(t *testing.T, name, prefix string) func() {
	t.Helper()
	adm := c.kube.AdmissionregistrationV1()
	_, err := adm.ValidatingAdmissionPolicies().Create(t.Context(), &admv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admv1.Fail),
			MatchConstraints: &admv1.MatchResources{ResourceRules: []admv1.NamedRuleWithOperations{{
				RuleWithOperations: admv1.RuleWithOperations{
					Operations: []admv1.OperationType{admv1.Create},
					Rule:       admv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/binding"}},
				},
			}}},
			Validations: []admv1.Validation{{
				Expression: "!object.metadata.name.startsWith('" + prefix + "')",
				Message:    "test policy " + name + " refuses this binding",
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = adm.ValidatingAdmissionPolicyBindings().Create(t.Context(), &admv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admv1.ValidationAction{admv1.Deny}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// A dry-run binding of a pod that does not exist: refused by the policy
	// once it is enforced, NotFound (from storage) while it is not.
	probe := func(ctx context.Context) (refused bool, err error) {
		err = c.kube.CoreV1().Pods("default").Bind(ctx, &v1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: prefix + "probe", Namespace: "default"},
			Target:     v1.ObjectReference{Kind: "Node", Name: "nowhere"},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err != nil && strings.Contains(err.Error(), name):
			return true, nil
		case apierrors.IsNotFound(err):
			return false, nil
		}
		return false, err
	}
	require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		refused, err := probe(ctx)
		return refused, err
	}), "policy %s never enforced", name)
	lifted := false
	lift := func() {
		if lifted {
			return
		}
		lifted = true
		require.NoError(t, adm.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{}))
		require.NoError(t, adm.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{}))
		require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			refused, err := probe(ctx)
			return !refused, err
		}), "policy %s still enforced", name)
	}
	t.Cleanup(func() {
		if !lifted {
			lifted = true
			_ = adm.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
			_ = adm.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	return lift
}

var bindFailedNode = regexp.MustCompile(`binding member \S+ to node (\S+) failed \(attempt (\d+) of (\d+)\)`)

// TestBindFailures (issue 10, seed 004): a member whose binding the API
// server refuses is retried on the same cells with backoff; after
// maxBindAttempts failures in a row the group goes back to Pending with a
// BindFailed event, and members that did bind are deleted first: a gang is
// never left partly bound.
func TestBindFailures(t *testing.T) {
	c := startCluster(t)
	c.createNodes(t, "bf", 1, 4, 0)
	c.createNamespace(t, "bf")
	c.createVC(t, "bf", []string{"bf"}, "V100-NODE", 4)
	liftFlaky := c.refuseBindings(t, "refuse-flaky", "flaky-")
	liftStuck := c.refuseBindings(t, "refuse-stuck", "stuck-")
	liftDoomed := c.refuseBindings(t, "refuse-doomed", "doomed-0")
	const attempts = 5
	c.startScheduler(t, physicalCluster("bf", 1, 4, 0), withArg("maxBindAttempts", attempts))

	flaky := gangPods("bf", "flaky", "bf", 1, 2, 4)
	stuck := gangPods("bf", "stuck", "bf", 1, 2, 1)
	doomed := gangPods("bf", "doomed", "bf", 1, 3, 1)
	c.createPods(t, flaky)
	c.createPods(t, stuck)
	c.createPods(t, doomed)

	t.Run("a failed binding is retried on the same cells", func(t *testing.T) {
		first := make([]string, len(flaky))
		for i, p := range flaky {
			ev := c.waitEvent(t, p, "(attempt 1 of 5)", 30*time.Second)
			m := bindFailedNode.FindStringSubmatch(ev)
			require.NotNil(t, m, ev)
			first[i] = m[1]
			require.Contains(t, ev, "refuse-flaky", "the API server's reason is in the event")
		}
		ag := c.waitAG(t, "bf", "flaky", func(ag *hv1.AffinityGroup) bool { return ag.Status.Reason == "BindFailed" })
		require.Contains(t, ag.Status.Message, "retried on the same cells")
		liftFlaky()
		nodes := c.waitBound(t, flaky, 40*time.Second)
		require.Equal(t, first, nodes, "bound where the failed bindings were going: the group kept its cells")
		for _, p := range flaky {
			for _, e := range c.events(t, p) {
				require.NotContains(t, e, "in a row", "never given up")
			}
		}
		c.waitAG(t, "bf", "flaky", phaseIs(hv1.AffinityGroupRunning))
	})

	t.Run("a group none of whose members binds goes back to Pending", func(t *testing.T) {
		ev := c.waitEvent(t, stuck[0], "failed 5 times in a row", 60*time.Second)
		require.Contains(t, ev, "gave its cells back and is Pending again")
		c.waitEvent(t, stuck[1], "is Pending again", 10*time.Second)
		// Every attempt before giving up was on one node.
		seen := map[string]bool{}
		for _, e := range c.events(t, stuck[0]) {
			if m := bindFailedNode.FindStringSubmatch(e); m != nil {
				seen[m[1]] = true
			}
		}
		require.Len(t, seen, 1, "retries on the same cells: %v", seen)
		c.requireUnbound(t, stuck, time.Second)
		// It is placed anew, and binds once the API server lets it.
		liftStuck()
		c.waitBound(t, stuck, 40*time.Second)
		c.waitAG(t, "bf", "stuck", phaseIs(hv1.AffinityGroupRunning))
	})

	t.Run("a partly bound group is never left so: its bound members are deleted", func(t *testing.T) {
		ev := c.waitEvent(t, doomed[0], "failed 5 times in a row", 60*time.Second)
		require.Contains(t, ev, "gives its placement up")
		require.Contains(t, ev, "doomed-1 and doomed-2 are deleted")
		c.waitEvent(t, doomed[1], "gives its placement up", 10*time.Second)
		c.waitGone(t, doomed[1:], 30*time.Second)
		ag := c.waitAG(t, "bf", "doomed", phaseIs(hv1.AffinityGroupFailed))
		require.Equal(t, "BindFailed", ag.Status.Reason)
		// Failed: no member bound and no cell held (the phase table's
		// Failing -> Failed); the member left waits for the others.
		c.requireUnbound(t, doomed[:1], time.Second)

		// The owner creates the deleted members again: a new attempt,
		// placed anew, bound whole once the API server lets it.
		liftDoomed()
		again := gangPods("bf", "doomed", "bf", 1, 3, 1)[1:]
		c.createPods(t, again)
		c.waitBound(t, append(doomed[:1], again...), 60*time.Second)
		c.waitAG(t, "bf", "doomed", phaseIs(hv1.AffinityGroupRunning))
	})
}
