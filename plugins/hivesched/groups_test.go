package hivesched

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// A placed group may give its cells back (PostFilter at once, PreFilter once
// the placement is stale) only while none of its members is reserved or
// bound.
func TestGroupIndexUnusedAndStale(t *testing.T) {
	x := newGroupIndex()
	var pods []*v1.Pod
	for i := 0; i < 2; i++ {
		p := pod(map[string]string{LabelVirtualCluster: "vc1", LabelAffinityGroup: "g"}, map[string]string{AnnotationGroupMembers: "2"}, 4)
		p.Name, p.UID = fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("uid%d", i))
		x.track(p, gpu)
		pods = append(pods, p)
	}
	const group, timeout = "ns/g", time.Second
	require.True(t, x.unused(group))
	require.False(t, x.staleAllocation(group, timeout), "never placed")

	x.allocated(group)
	require.False(t, x.staleAllocation(group, timeout), "placed just now")
	x.groups[group].allocatedAt = time.Now().Add(-3 * timeout)
	require.True(t, x.staleAllocation(group, timeout))

	x.reserve(group, pods[0])
	require.False(t, x.unused(group), "a member is reserved")
	require.False(t, x.staleAllocation(group, timeout))
	require.True(t, x.unreserve(group, pods[0]), "no member bound: roll back")
	require.True(t, x.unused(group))

	bound := pods[1].DeepCopy()
	bound.Spec.NodeName = "n1"
	x.track(bound, gpu)
	require.False(t, x.unused(group), "a member is bound")
	require.False(t, x.staleAllocation(group, timeout))
	require.False(t, x.unreserve(group, pods[0]), "a member is bound: keep the cells")

	require.True(t, x.unused("ns/unknown"))
}

// A pod whose request is refused sorts after every valid pod, whatever
// priority it claims (an out-of-range one sorted first).
func TestInvalidPodsSortLast(t *testing.T) {
	x := newGroupIndex()
	valid := pod(map[string]string{LabelVirtualCluster: "vc1"}, map[string]string{AnnotationPriority: "-1"}, 1)
	valid.Name, valid.UID = "valid", "u-valid"
	bad := pod(map[string]string{LabelVirtualCluster: "vc1"}, map[string]string{AnnotationPriority: "2000000000"}, 1)
	bad.Name, bad.UID = "bad", "u-bad"
	bad.Spec.Priority = ptr.To[int32](2000000000)
	plain := pod(nil, nil, 0)
	plain.Name, plain.UID = "plain", "u-plain"
	kv, kb, kp := x.sortKey(valid, gpu), x.sortKey(bad, gpu), x.sortKey(plain, gpu)
	require.Greater(t, kv.priority, kb.priority, "an opportunistic valid pod goes before an invalid one")
	require.Greater(t, kp.priority, kb.priority, "a plain pod goes before an invalid one")
}
