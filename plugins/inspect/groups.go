package inspect

import (
	"sort"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
	"github.com/hivesched/hivesched/plugins/affinitygroups"
	"github.com/hivesched/hivesched/plugins/cellcore"
)

// groupList lists the groups the core holds, with their lifecycles; all
// adds the groups only the AffinityGroup tracker knows (waiting for their
// members, refused by their VC, or ended and kept for their retention).
func (s *Server) groupList(all bool) []iv1.AffinityGroup {
	names := s.core.AffinityGroupNames()
	lcs := s.lifecycleMap()
	out := make([]iv1.AffinityGroup, 0, len(names))
	inCore := make(map[string]bool, len(names))
	for _, n := range names {
		if g, _, ok := s.group(n, false); ok {
			s.addLifecycle(&g, lcs[n])
			out = append(out, g)
			inCore[n] = true
		}
	}
	if !all {
		return out
	}
	for n, lc := range lcs {
		if inCore[n] {
			continue
		}
		g := iv1.AffinityGroup{Name: n, VirtualCluster: lc.VirtualCluster, Priority: lc.Priority}
		if pods := s.groups.Pods(n); len(pods) > 0 {
			if req, err := s.groups.Request(pods[0]); err == nil && req != nil {
				g.VirtualCluster, g.Priority = req.Group.VirtualCluster, req.Group.Priority
				g.MemberPods = int32(req.TotalPods())
			}
		}
		s.addLifecycle(&g, lc)
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *Server) lifecycleMap() map[string]affinitygroups.Lifecycle {
	if s.lifecycles == nil {
		return nil
	}
	return s.lifecycles.Lifecycles()
}

// addLifecycle adds what the tracker and the group index know of a group:
// phase, member pods, age and, when it waits, the sentence why.
func (s *Server) addLifecycle(g *iv1.AffinityGroup, lc affinitygroups.Lifecycle) {
	g.Phase = string(lc.Phase)
	if len(g.Pods) > 0 {
		g.MemberPods = int32(len(g.Pods))
	}
	waiting := g.State == "" || g.State == cellcore.AGPending.String() || g.State == cellcore.AGPreempting.String()
	if g.Reason == "" && waiting {
		g.Reason = lc.Message
	}
	pods := s.groups.Pods(g.Name)
	g.CreatedPods = int32(len(pods))
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			g.BoundPods++
		}
		if t := p.CreationTimestamp.Time; !t.IsZero() && (g.Created == nil || t.Before(*g.Created)) {
			t = t.UTC()
			g.Created = &t
		}
	}
	if g.Created == nil && !lc.Since.IsZero() {
		t := lc.Since.UTC()
		g.Created = &t
	}
}

// knownGroups says whether a name is a group the scheduler knows (what a
// sentence may name and redact hides).
func (s *Server) knownGroups(v *viewer) func(string) bool {
	if v == nil || v.all {
		return func(string) bool { return false }
	}
	set := map[string]bool{}
	for _, n := range s.core.AffinityGroupNames() {
		set[n] = true
	}
	for n := range s.lifecycleMap() {
		set[n] = true
	}
	return func(n string) bool { return set[n] }
}

// visibleGroups keeps the groups the viewer may see, without the names of
// others in their sentences.
func (s *Server) visibleGroups(groups []iv1.AffinityGroup, v *viewer) []iv1.AffinityGroup {
	if v == nil || v.all {
		return groups
	}
	var known func(string) bool
	out := make([]iv1.AffinityGroup, 0)
	for _, g := range groups {
		if !v.seesGroup(g.Name) {
			continue
		}
		if known == nil {
			known = s.knownGroups(v)
		}
		out = append(out, s.redactGroup(g, v, known))
	}
	return out
}

// redactGroup hides other namespaces' group names in a group the viewer
// sees.
func (s *Server) redactGroup(g iv1.AffinityGroup, v *viewer, known func(string) bool) iv1.AffinityGroup {
	if v == nil || v.all {
		return g
	}
	g.Reason = v.redact(g.Reason, known)
	if len(g.Victims) > 0 {
		victims := make([]string, len(g.Victims))
		for i, n := range g.Victims {
			victims[i] = v.groupName(n)
		}
		g.Victims = victims
	}
	return g
}

// redactExplanation hides other namespaces' group names in a pod's
// explanation.
func (s *Server) redactExplanation(e iv1.PodExplanation, v *viewer) iv1.PodExplanation {
	if v == nil || v.all {
		return e
	}
	known := s.knownGroups(v)
	e.Summary = v.redact(e.Summary, known)
	if e.Group != nil {
		g := s.redactGroup(*e.Group, v, known)
		e.Group = &g
	}
	if len(e.Holders) > 0 {
		holders := make([]iv1.Holder, len(e.Holders))
		for i, h := range e.Holders {
			h.Group = v.groupName(h.Group)
			holders[i] = h
		}
		e.Holders = holders
	}
	return e
}

// redactCells copies the tree without the names of the groups the viewer
// may not see (the cells stay, with their state and priority).
func redactCells(cells iv1.ClusterCells, v *viewer) iv1.ClusterCells {
	if v == nil || v.all {
		return cells
	}
	out := cells
	out.Chains = make([]iv1.Chain, len(cells.Chains))
	for i, ch := range cells.Chains {
		ch.Cells = redactCellList(ch.Cells, v)
		out.Chains[i] = ch
	}
	return out
}

func redactCellList(cells []iv1.Cell, v *viewer) []iv1.Cell {
	if cells == nil {
		return nil
	}
	out := make([]iv1.Cell, len(cells))
	for i, c := range cells {
		if c.Group != "" && !v.seesGroup(c.Group) {
			c.Group = ""
		}
		if c.ReservingGroup != "" && !v.seesGroup(c.ReservingGroup) {
			c.ReservingGroup = ""
		}
		c.Children = redactCellList(c.Children, v)
		out[i] = c
	}
	return out
}
