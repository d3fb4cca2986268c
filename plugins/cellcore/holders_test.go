package cellcore

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A holder level names its first three groups by name whatever the order
// groups come and go in, including when the first ones go one after the
// other (the spares run out and the level counts them again), and when it
// is first asked after groups came and went unnamed.
func TestHolderLevelFirstByName(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	lv := &holderLevel{}
	var in []*AffinityGroup
	for step := 0; step < 20000; step++ {
		switch {
		case len(in) == 0 || r.Intn(3) > 0 && len(in) < 200:
			g := &AffinityGroup{spec: AffinityGroupSpec{Name: fmt.Sprintf("g%04d", r.Intn(10000))}}
			lv.add(g)
			in = append(in, g)
		case r.Intn(2) == 0: // the first by name goes
			slices.SortFunc(in, func(a, b *AffinityGroup) int { return strings.Compare(a.spec.Name, b.spec.Name) })
			lv.remove(in[0])
			in = in[1:]
		default:
			i := r.Intn(len(in))
			lv.remove(in[i])
			in = append(in[:i], in[i+1:]...)
		}
		require.Len(t, lv.groups, len(in))
		if step < 1000 {
			continue // not asked yet: the level keeps no names
		}
		want := slices.SortedFunc(slices.Values(in), func(a, b *AffinityGroup) int { return strings.Compare(a.spec.Name, b.spec.Name) })
		got := lv.firstByName()
		require.Len(t, got, min(3, len(want)), "step %d", step)
		for i := range got {
			require.Equal(t, want[i].spec.Name, got[i].spec.Name, "step %d", step)
		}
	}
}
