// Package cellcore is hivesched's scheduling core: HiveD's cell model, buddy
// cell allocation, virtual clusters, and the affinity group (AG) and cell state
// machines of the HiveD design document (seed 000), implemented exactly and
// named as that document names them.
//
// The package is plain Go: it never talks to an API server and holds no
// client-go types, so it can be tested exhaustively and benchmarked in
// isolation. The scheduler framework plugins translate Kubernetes objects into
// calls on Core and back.
//
// The model in brief:
//
//   - Cell types form chains (a forest of types). A physical cell of a chain's
//     top type roots a full tree of physical cells; leaves are devices (GPUs).
//   - Physical cells not bound to any virtual cluster (VC) form the chain's free
//     pool, kept as buddy free lists per level (split on allocation, merged on
//     release).
//   - A VC owns a number of virtual cells per (chain, level). A virtual cell is
//     bound lazily to a free physical cell of its level when the VC first needs
//     it, and unbound when the last guaranteed leaf under it is released. The
//     safety invariant (for every chain and level, the free pool can still
//     supply every VC's unbound virtual cells) is checked whenever a VC changes
//     and is preserved by every binding.
//   - Affinity groups are gangs. Guaranteed AGs (priority >= 0) are placed only
//     inside their VC's cells; opportunistic AGs (priority -1) use any free
//     leaf cell and never preempt.
//
// All exported methods of Core are safe for concurrent use.
package cellcore
