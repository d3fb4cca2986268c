package virtualclusters

import "github.com/hivesched/hivesched/plugins/cellcore"

// Breakdown splits a VC's leaf cells so that they add up: Total = Used +
// Free + Lent + Unavailable, each cell counted once. Used and Free are the
// core's (its guaranteed groups' cells, reserved ones included; healthy free
// cells and virtual cells not bound yet); Lent is counted from the VC's cell
// records; Unavailable is the rest: lost hardware, devices held by pods
// hivesched did not place, hardware of unknown health, and opportunistic
// use of such hardware. The VirtualCluster status (`kubectl get vc`), the
// inspect API and the dashboard all count with it.
type Breakdown struct {
	Total, Used, Free, Lent, Unavailable int32
	// Reserved: of Used, cells reserved for the VC's preempting groups.
	Reserved int32
}

// LeafUse counts, of a VC's leaf cells, those lent (healthy, used by an
// opportunistic group and reserved by none) and those reserved for its
// preempting groups.
type LeafUse struct{ Lent, Reserved int32 }

// CountLeafUse counts LeafUse per VC from cell records (CellRecords of one
// VC, or of the whole cluster): one pass.
func CountLeafUse(recs []cellcore.CellRecord) map[string]LeafUse {
	out := map[string]LeafUse{}
	for i := range recs {
		r := &recs[i]
		if r.Level() != 1 || r.VirtualCluster == "" {
			continue
		}
		switch {
		case r.Reserving != "":
			u := out[r.VirtualCluster]
			u.Reserved++
			out[r.VirtualCluster] = u
		case r.Group != "" && r.Priority < 0 && r.Health == "good":
			u := out[r.VirtualCluster]
			u.Lent++
			out[r.VirtualCluster] = u
		}
	}
	return out
}

// LeafBreakdown counts a VC's leaf cells from its status and its LeafUse.
// The two are copied under the core's lock one after the other: if a cell
// changed between them, Lent is capped so that the sum still holds.
func LeafBreakdown(st cellcore.VirtualClusterStatus, use LeafUse) Breakdown {
	var b Breakdown
	for _, c := range st.Cells {
		b.Total += c.LeafCells
		b.Used += c.UsedLeafCells
		b.Free += c.FreeLeafCells
	}
	for _, c := range st.PinnedCells {
		b.Total += c.LeafCells
		b.Used += c.UsedLeafCells
		b.Free += c.FreeLeafCells
	}
	rest := b.Total - b.Used - b.Free
	b.Lent = max(0, min(use.Lent, rest))
	b.Unavailable = max(0, rest-b.Lent)
	b.Reserved = min(use.Reserved, b.Used)
	return b
}
