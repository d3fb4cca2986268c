package podrequest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// paddedSpec is a valid HiveD v1 spec padded with YAML comments (which
// decode to nothing) to exactly n bytes.
func paddedSpec(t *testing.T, n int) string {
	var b strings.Builder
	b.WriteString("virtualCluster: vc1\nleafCellNumber: 1\n")
	for b.Len() < n {
		r := min(n-b.Len(), 80)
		if r == 1 {
			b.WriteString("\n")
			continue
		}
		b.WriteString("#" + strings.Repeat("x", r-2) + "\n")
	}
	require.Len(t, b.String(), n)
	return b.String()
}

// TestHivedSpecSizeBoundBeforeDecoding (issue 28, finding 1): HiveD's
// annotation is refused by its size before it is decoded. A spec of
// exactly MaxSpecBytes parses; one byte more is refused with the size
// error, whatever it holds: an oversized annotation that is not even YAML,
// or one made of unknown keys, gets the size error, never the decoder's
// (which it would get if it were decoded first).
func TestHivedSpecSizeBoundBeforeDecoding(t *testing.T) {
	sizeErr := fmt.Sprintf("more than the %d a scheduling spec may take", MaxSpecBytes)

	r, err := Parse(pod(nil, map[string]string{HivedSpecAnnotation: paddedSpec(t, MaxSpecBytes)}, 0), gpu)
	require.NoError(t, err, "a spec of exactly MaxSpecBytes is read")
	require.Equal(t, int32(1), r.LeafCellNumber)

	_, err = Parse(pod(nil, map[string]string{HivedSpecAnnotation: paddedSpec(t, MaxSpecBytes+1)}, 0), gpu)
	require.ErrorContains(t, err, sizeErr)
	require.ErrorContains(t, err, fmt.Sprintf("is %d bytes", MaxSpecBytes+1))

	for name, raw := range map[string]string{
		"not YAML": "virtualCluster: [" + strings.Repeat("a", MaxSpecBytes),
		"unknown keys": func() string {
			var b strings.Builder
			b.WriteString("virtualCluster: vc1\nleafCellNumber: 1\n")
			for i := 0; b.Len() <= MaxSpecBytes; i++ {
				fmt.Fprintf(&b, "k%d: v\n", i)
			}
			return b.String()
		}(),
		"duplicate keys": strings.Repeat("virtualCluster: vc1\n", MaxSpecBytes/20+1),
	} {
		t.Run(name, func(t *testing.T) {
			require.Greater(t, len(raw), MaxSpecBytes)
			_, err := Parse(pod(nil, map[string]string{HivedSpecAnnotation: raw}, 0), gpu)
			require.ErrorContains(t, err, sizeErr)
			require.NotContains(t, err.Error(), "not valid YAML", "refused before it was decoded")
			require.NotContains(t, err.Error(), "not a HiveD scheduling spec", "refused before it was decoded")
		})
	}
}

// TestHivedSpecStrictDecoding (issue 28, finding 1): within the bound, the
// decoder refuses what a spec does not have: unknown keys (at the top and
// nested, so that a tenant cannot pad a spec with keys that mean nothing)
// and duplicate keys. HiveD's own fields that hivesched ignores still
// parse.
func TestHivedSpecStrictDecoding(t *testing.T) {
	for name, tc := range map[string]struct {
		spec, want string
	}{
		"unknown top-level key":   {"virtualCluster: vc1\nleafCellNumber: 1\npadding: x", `unknown field "padding"`},
		"many small unknown keys": {"virtualCluster: vc1\nleafCellNumber: 1\nk0: v\nk1: v\nk2: v", `unknown field "k0"`},
		"unknown key in a member": {"virtualCluster: vc1\nleafCellNumber: 1\naffinityGroup: {name: g, members: [{podNumber: 1, leafCellNumber: 1, extra: 1}]}",
			`unknown field "extra"`},
		"unknown key in a v2 pod group": {"version: v2\nvirtualCluster: vc1\ncellType: V100\ncellNumber: 1\npodRootGroup: {name: g, other: 1}",
			`unknown field "other"`},
		"duplicate key": {"virtualCluster: vc1\nvirtualCluster: vc2\nleafCellNumber: 1", "not valid YAML"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(pod(nil, map[string]string{HivedSpecAnnotation: tc.spec}, 0), gpu)
			require.ErrorContains(t, err, tc.want)
		})
	}
	r, err := Parse(pod(nil, map[string]string{HivedSpecAnnotation: "virtualCluster: vc1\nleafCellNumber: 1\ngangReleaseEnable: true\nignoreK8sSuggestedNodes: true"}, 0), gpu)
	require.NoError(t, err, "HiveD's fields hivesched does not use are known")
	require.Equal(t, "vc1", r.Group.VirtualCluster)
}
