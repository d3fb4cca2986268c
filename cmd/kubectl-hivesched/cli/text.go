package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
)

// leafLegend explains the characters of a node's leaf map.
const leafLegend = "leaf cells: U used (guaranteed)  o used (opportunistic)  R reserved for a preempting group  . free, bound to a VC  _ free  X bad hardware  F held by a pod hivesched did not place"

// leafChar is one leaf cell in a node's leaf map.
func leafChar(c *iv1.Cell) byte {
	switch {
	case c.Health == "foreign":
		return 'F'
	case c.Health != "" && c.Health != "good":
		return 'X'
	case c.State == "Reserving" || c.State == "Reserved":
		return 'R'
	case c.State == "Used" && c.Priority != nil && *c.Priority < 0:
		return 'o'
	case c.State == "Used":
		return 'U'
	case c.VirtualCluster != "":
		return '.'
	}
	return '_'
}

// leafMap draws a cell's leaves in order, children of higher levels
// separated by wider gaps (switches by one space, sockets by two).
func leafMap(c *iv1.Cell) string {
	if len(c.Children) == 0 {
		return string(leafChar(c))
	}
	parts := make([]string, len(c.Children))
	for i := range c.Children {
		parts[i] = leafMap(&c.Children[i])
	}
	return strings.Join(parts, strings.Repeat(" ", max(c.Level-2, 0)))
}

// groupsOn counts a cell's leaves per group using them, "ns/g(8)".
func groupsOn(c *iv1.Cell) string {
	counts := map[string]int{}
	var walk func(*iv1.Cell)
	walk = func(c *iv1.Cell) {
		if len(c.Children) == 0 {
			if c.Group != "" {
				counts[c.Group]++
			}
			if c.ReservingGroup != "" {
				counts[c.ReservingGroup+" reserving"]++
			}
			return
		}
		for i := range c.Children {
			walk(&c.Children[i])
		}
	}
	walk(c)
	var parts []string
	for _, g := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s(%d)", g, counts[g]))
	}
	return strings.Join(parts, " ")
}

func binding(c *iv1.Cell) string {
	switch {
	case c.PinnedCellID != "" && c.VirtualCluster != "":
		return c.VirtualCluster + " pinned:" + c.PinnedCellID
	case c.PinnedCellID != "":
		return "pinned:" + c.PinnedCellID
	case c.VirtualCluster != "":
		return c.VirtualCluster
	}
	return "-"
}

func health(c *iv1.Cell) string {
	if c.Health == "" || c.Health == "good" {
		return ""
	}
	return " health:" + c.Health
}

// writeCells prints the tree, one line per cell down to the nodes; a
// node's leaves are one map on its line.
func writeCells(w io.Writer, cells *iv1.ClusterCells) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if f := cells.Filter; f.VirtualCluster != "" || f.Node != "" {
		fmt.Fprintf(tw, "filter: vc=%q node=%q (ancestors of the matching cells are shown whole)\n", f.VirtualCluster, f.Node)
	}
	for ci := range cells.Chains {
		ch := &cells.Chains[ci]
		fmt.Fprintf(tw, "chain %s (leaf cell type %s; levels %s)\n", ch.Name, ch.LeafCellType, strings.Join(ch.Levels, " < "))
		fmt.Fprintln(tw, "CELL\tVC\tLEAVES USED/TOTAL\tLEAF CELLS\tGROUPS")
		var walk func(c *iv1.Cell, depth int)
		walk = func(c *iv1.Cell, depth int) {
			name := strings.Repeat("  ", depth) + c.CellType + " " + c.Address
			if c.Node != "" || len(c.Children) == 0 {
				// A node (or a leaf-only top cell): its leaves on one line.
				fmt.Fprintf(tw, "%s\t%s\t%d/%d%s\t[%s]\t%s\n", name, binding(c), c.UsedLeaves, c.Leaves, health(c), leafMap(c), groupsOn(c))
				return
			}
			fmt.Fprintf(tw, "%s\t%s\t%d/%d (%d free, %d bad)%s\t\t\n", name, binding(c), c.UsedLeaves, c.Leaves, c.FreeLeaves, c.BadLeaves, health(c))
			for i := range c.Children {
				walk(&c.Children[i], depth+1)
			}
		}
		for i := range ch.Cells {
			walk(&ch.Cells[i], 0)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintln(tw, leafLegend)
	return tw.Flush()
}

// writeWhy explains one pod in plain words.
func writeWhy(w io.Writer, ex *iv1.PodExplanation) error {
	fmt.Fprintf(w, "pod %s\n", ex.Pod)
	if g := ex.Group; g != nil {
		prio := fmt.Sprint(g.Priority)
		if g.Priority < 0 {
			prio = "-1 (opportunistic)"
		}
		if g.Downgraded {
			prio += ", lazily preempted: runs as opportunistic"
		}
		fmt.Fprintf(w, "  affinity group %s in virtual cluster %s: %s, priority %s\n", g.Name, g.VirtualCluster, g.State, prio)
		for _, p := range g.Pods {
			if p.Node == "" {
				continue
			}
			name := p.Name
			if name == "" {
				name = "(a member)"
			}
			fmt.Fprintf(w, "  %s runs on %s, %s leaf cells %v\n", name, p.Node, p.LeafCellType, p.LeafCellIndices)
		}
		if len(g.Victims) > 0 {
			fmt.Fprintf(w, "  preempting: %s\n", strings.Join(g.Victims, ", "))
		}
	}
	fmt.Fprintf(w, "  %s\n", ex.Summary)
	if len(ex.Holders) > 0 {
		fmt.Fprintln(w, "  the virtual cluster's cells are held by:")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    GROUP\tPRIORITY\tLEAF CELLS\tIT MAY PREEMPT THEM")
		for _, h := range ex.Holders {
			yes := "no"
			if h.Preemptible {
				yes = "yes"
			}
			fmt.Fprintf(tw, "    %s\t%d\t%d\t%s\n", h.Group, h.Priority, h.LeafCells, yes)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

var groupStates = []string{"Pending", "Preempting", "Allocated", "Being preempted"}

func writeVCs(w io.Writer, vcs []iv1.VirtualCluster, detail bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// TOTAL = USED + FREE + LENT + UNAVAILABLE; OPP (the VC's own
	// opportunistic use, anywhere) is outside TOTAL: as kubectl get vc.
	fmt.Fprintln(tw, "NAME\tSTATE\tTOTAL\tUSED\tFREE\tLENT\tUNAVAILABLE\tOPP\tPENDING\tPREEMPTING\tALLOCATED\tBEING PREEMPTED\tCELLS")
	for _, vc := range vcs {
		var cells []string
		for _, c := range vc.Cells {
			cells = append(cells, fmt.Sprintf("%dx%s (%d bound)", c.Total, c.CellType, c.Bound))
		}
		for _, p := range vc.PinnedCells {
			cells = append(cells, "pinned:"+p.ID)
		}
		c := vc.LeafCells
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d", vc.Name, vc.State, c.Total, c.Used, c.Free, c.Lent, c.Unavailable, c.Opportunistic)
		for _, s := range groupStates {
			fmt.Fprintf(tw, "\t%d", vc.AffinityGroups[s])
		}
		fmt.Fprintf(tw, "\t%s\n", strings.Join(cells, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if detail {
		for _, vc := range vcs {
			for _, c := range vc.Cells {
				if len(c.Physical) > 0 {
					fmt.Fprintf(w, "%s %s bound to: %s\n", vc.Name, c.CellType, strings.Join(c.Physical, ", "))
				}
			}
			for _, p := range vc.PinnedCells {
				fmt.Fprintf(w, "%s pinned %s (%s): %s\n", vc.Name, p.ID, p.CellType, p.Physical)
			}
		}
	}
	return nil
}

func writeGroups(w io.Writer, groups []iv1.AffinityGroup) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVC\tSTATE\tPRIORITY\tPODS\tNODES")
	for _, g := range groups {
		nodes := map[string]bool{}
		for _, p := range g.Pods {
			if p.Node != "" {
				nodes[p.Node] = true
			}
		}
		prio := fmt.Sprint(g.Priority)
		if g.Downgraded {
			prio += " (lazily preempted)"
		}
		ns := strings.Join(slices.Sorted(maps.Keys(nodes)), ",")
		if ns == "" {
			ns = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", g.Name, g.VirtualCluster, g.State, prio, len(g.Pods), ns)
	}
	return tw.Flush()
}
