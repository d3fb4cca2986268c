package hivesched

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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
