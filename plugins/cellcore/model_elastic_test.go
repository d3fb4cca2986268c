package cellcore

import (
	"slices"

	"github.com/stretchr/testify/require"
)

// The model test's elastic gangs: about one new group in five is an extra
// pod of a running gang (its spec but one pod of any size; half of them may
// overflow their VC as opportunistic), so that gangs grow; the model's pod and group deletions shrink them; and now and then
// a member of a gang is replaced by one of its extras (PromoteExtra), as the
// plugin does when a member goes while an extra of its size runs. Every
// invariant and the VC guarantee of every gang are checked after every
// step as for any group; an extra's own promise (it waits while its gang
// is not placed, and stays on its gang's chain) is not the oracle's.
func init() {
	modelLivenessExempt = func(s AffinityGroupSpec) bool { return s.ExtraOf != "" }
	modelElasticHook = func(m *modelRun, s *AffinityGroupSpec) {
		if m.r.Intn(5) != 0 {
			return
		}
		var gangs []string
		for _, n := range m.groupNames() {
			if g := m.groups[n]; g.ExtraOf == "" {
				if st, ok := m.k.AffinityGroupState(n); ok && st == AGAllocated {
					gangs = append(gangs, n)
				}
			}
		}
		if len(gangs) == 0 {
			return
		}
		slices.Sort(gangs)
		gang := m.groups[m.pick(gangs)]
		if m.r.Intn(6) == 0 {
			m.promoteOne(gang.Name)
		}
		size := s.Members[0].LeafCellNumber
		name := s.Name
		*s = gang
		s.Name, s.ExtraOf = name, gang.Name
		s.Members = []AffinityGroupMember{{PodNumber: 1, LeafCellNumber: size}}
		// Half of them may run beyond their VC as opportunistic.
		s.ExtraOverflow = m.r.Intn(2) == 0
		m.stats["elastic-extra"]++
	}
}

// promoteOne moves a running extra of gang into the slot of one of its
// members of the same size.
func (m *modelRun) promoteOne(gang string) {
	st, ok := m.k.AffinityGroupStatus(gang)
	if !ok {
		return
	}
	for _, x := range m.k.ExtrasOf(gang) {
		xs, ok := m.k.AffinityGroupStatus(x)
		if !ok || xs.State != AGAllocated || len(xs.Pods) != 1 || xs.Pods[0].PodKey == "" || !m.k.CanPromote(gang, x) {
			continue
		}
		for _, p := range st.Pods {
			if p.PodKey != "" && p.LeafCellNumber == xs.Pods[0].LeafCellNumber {
				if st.State != AGAllocated {
					return
				}
				_, err := m.k.PromoteExtra(gang, p.PodKey, x)
				require.NoError(m.t, err)
				delete(m.groups, x)
				m.stats["elastic-promoted"]++
				return
			}
		}
	}
}
