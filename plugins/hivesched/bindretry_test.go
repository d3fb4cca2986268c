package hivesched

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

func TestBindRetriesCountsFailuresInARow(t *testing.T) {
	r := newBindRetries(3)
	const g = "ns/g"
	a, b := types.UID("a"), types.UID("b")

	n, limit := r.failed(g, a)
	require.Equal(t, 1, n)
	require.False(t, limit)
	n, limit = r.failed(g, b)
	require.Equal(t, 1, n, "each member counts its own failures")
	require.False(t, limit)
	n, limit = r.failed(g, a)
	require.Equal(t, 2, n)
	require.False(t, limit)

	r.bound(g, a) // a success resets the member's count
	n, _ = r.failed(g, a)
	require.Equal(t, 1, n)

	r.failed(g, b)
	n, limit = r.failed(g, b)
	require.Equal(t, 3, n)
	require.True(t, limit, "the third failure in a row reaches the limit")

	require.False(t, r.gaveUp(g))
	r.giveUp(g)
	require.True(t, r.gaveUp(g))
	r.bound(g, a)
	require.True(t, r.gaveUp(g), "a member bound meanwhile does not undo a give-up")
	r.forget(g)
	require.False(t, r.gaveUp(g))
	n, _ = r.failed(g, b)
	require.Equal(t, 1, n, "forgotten: counting starts again")
	require.False(t, r.gaveUp("ns/other"))
}

func TestBindRetriesLimitAtLeastOne(t *testing.T) {
	r := newBindRetries(0)
	_, limit := r.failed("ns/g", "a")
	require.True(t, limit)
}
