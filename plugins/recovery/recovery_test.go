package recovery

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/placement"
)

// A rebuild that fails is tried again; one that succeeds runs once, marks
// the gate done and runs what follows it.
func TestGateOnce(t *testing.T) {
	var g Gate
	require.False(t, g.Done())
	err := g.Once(func() error { return errors.New("informers did not sync") }, func() { t.Fatal("after a failed rebuild") })
	require.Error(t, err)
	require.False(t, g.Done())
	rebuilds, afters := 0, 0
	for i := 0; i < 3; i++ {
		require.NoError(t, g.Once(func() error { rebuilds++; return nil }, func() { afters++; require.True(t, g.Done()) }))
	}
	require.Equal(t, 1, rebuilds)
	require.Equal(t, 1, afters)
	g.Hold(func(rebuilt bool) { require.True(t, rebuilt) })
}

// Running pods are gathered by the group their trusted record names,
// higher priority first, then by name; pods without a record, unbound or
// finished are left out, and untrusted ones reported.
func TestGroups(t *testing.T) {
	rec := func(group string, prio int32) placement.Record {
		return placement.Record{Group: group, Priority: prio, Node: "n", Members: []cellcore.AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 1}}, LeafCellIndices: []int32{0}}
	}
	pod := func(name, node string, r *placement.Record) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}, Spec: v1.PodSpec{NodeName: node}}
		if r != nil {
			p.Annotations = map[string]string{placement.Annotation: r.Encode()}
		}
		return p
	}
	low, high, mid, other := rec("ns/low", 0), rec("ns/high", 9), rec("ns/b", 5), rec("ns/a", 5)
	finished := pod("finished", "n", &high)
	finished.Status.Phase = v1.PodSucceeded
	forged := pod("forged", "n", &high)
	pods := []*v1.Pod{pod("low-0", "n", &low), pod("high-0", "n", &high), pod("b-0", "n", &mid), pod("a-0", "n", &other), pod("high-1", "n", &high),
		pod("pending", "", &high), pod("plain", "n", nil), finished, forged}
	var refused []string
	groups := Groups(pods, func(p *v1.Pod) (placement.Record, error) {
		if p == forged {
			return placement.Record{}, errors.New("not signed")
		}
		return placement.Decode(p.Annotations[placement.Annotation])
	}, func(p *v1.Pod, err error) { refused = append(refused, p.Name) })
	var names []string
	for _, g := range groups {
		names = append(names, g.Name)
	}
	require.Equal(t, []string{"ns/high", "ns/a", "ns/b", "ns/low"}, names)
	require.Len(t, groups[0].Pods, 2)
	require.Equal(t, []string{"forged"}, refused)
}
