package english

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestJoinNames(t *testing.T) {
	require.Equal(t, "no group", JoinNames(nil))
	require.Equal(t, "a", JoinNames([]string{"a"}))
	require.Equal(t, "a and b", JoinNames([]string{"a", "b"}))
	require.Equal(t, "a, b and c", JoinNames([]string{"a", "b", "c"}))
}
