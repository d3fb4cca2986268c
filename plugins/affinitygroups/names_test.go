package affinitygroups

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
)

// TestObjectName (issue 28, finding 5): group names valid as label values
// or HiveD names but not as object names get a valid, distinct object name.
func TestObjectName(t *testing.T) {
	require.Equal(t, "bert", ObjectName("bert"), "a valid name stays")
	seen := map[string]string{}
	for _, g := range []string{"Train_Job.V2", "train-job.v2", "alice~job1/default", "alice~job1/Default", strings.Repeat("x", 300), "___", "-a-"} {
		n := ObjectName(g)
		require.Empty(t, validation.IsDNS1123Subdomain(n), "%q -> %q", g, n)
		require.Empty(t, seen[n], "%q and %q share object name %q", g, seen[n], n)
		seen[n] = g
	}
}
