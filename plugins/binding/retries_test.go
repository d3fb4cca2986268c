package binding

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

func TestBindRetriesCountsFailuresInARow(t *testing.T) {
	r := NewRetries(3)
	const g = "ns/g"
	a, b := types.UID("a"), types.UID("b")

	n, limit := r.Failed(g, a)
	require.Equal(t, 1, n)
	require.False(t, limit)
	n, limit = r.Failed(g, b)
	require.Equal(t, 1, n, "each member counts its own failures")
	require.False(t, limit)
	n, limit = r.Failed(g, a)
	require.Equal(t, 2, n)
	require.False(t, limit)

	r.Bound(g, a) // a success resets the member's count
	n, _ = r.Failed(g, a)
	require.Equal(t, 1, n)

	r.Failed(g, b)
	n, limit = r.Failed(g, b)
	require.Equal(t, 3, n)
	require.True(t, limit, "the third failure in a row reaches the limit")

	require.False(t, r.GaveUp(g))
	r.GiveUp(g)
	require.True(t, r.GaveUp(g))
	r.Bound(g, a)
	require.True(t, r.GaveUp(g), "a member bound meanwhile does not undo a give-up")
	r.Forget(g)
	require.False(t, r.GaveUp(g))
	n, _ = r.Failed(g, b)
	require.Equal(t, 1, n, "forgotten: counting starts again")
	require.False(t, r.GaveUp("ns/other"))
}

func TestBindRetriesLimitAtLeastOne(t *testing.T) {
	r := NewRetries(0)
	_, limit := r.Failed("ns/g", "a")
	require.True(t, limit)
}
