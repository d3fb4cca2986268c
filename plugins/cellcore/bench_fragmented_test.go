package cellcore

import (
	"fmt"
	"math/rand"
	"testing"
	"time"
)

// fragmentedCore builds the cluster where the linear worst cases live.
// Each VC is filled with small gangs (priorities 0 to 2, pods of one to
// eight leaves): vc-a and vc-b to all their leaf cells, vc-c and vc-d to
// 85% (some of their virtual cells stay unbound); then groups are deleted
// at random, about 60% of them, but never the last group on a node, so
// that free leaves are scattered over partly used nodes, the bound cells
// stay bound and hardly a node is wholly free. Opportunistic groups fill
// the unreserved cells and spill into the VCs' idle ones, thinned the same
// way. A gang of whole nodes then fails in every bound cell at its first
// levels: in vc-c and vc-d it binds a fresh cell, in vc-a and vc-b it
// waits.
func fragmentedCore(b *testing.B, nodes int) *Core {
	b.Helper()
	k := newHealthyCore(b, benchConfig(nodes))
	vcs := benchVCs(nodes)
	for _, v := range vcs {
		if _, err := k.SetVirtualCluster(v); err != nil {
			b.Fatal(err)
		}
	}
	r := rand.New(rand.NewSource(7))
	var names []string
	n := 0
	fill := func(vc string, opportunistic bool, shapes [][2]int32, target int32) {
		var used int32
		// Until the target, or until the cells are so full that 50
		// groups in a row find no room.
		for fails := 0; used < target && fails < 50; {
			sh := shapes[r.Intn(len(shapes))]
			n++
			prio := int32(r.Intn(3))
			if opportunistic {
				prio = OpportunisticPriority
			}
			s := ag(fmt.Sprintf("frag-%d", n), vc, prio, sh[0], sh[1])
			d, err := k.Schedule(s)
			if err != nil {
				b.Fatal(err)
			}
			if d.Kind != Placed {
				if _, err := k.DeleteAffinityGroup(s.Name); err != nil {
					b.Fatal(err)
				}
				fails++
				continue
			}
			fails = 0
			bindAll(b, k, d)
			used += sh[0] * sh[1]
			names = append(names, s.Name)
		}
	}
	// thin deletes groups at random but keeps, on every node, the group
	// with the fewest leaves there.
	thin := func(keep float64) {
		type anchor struct {
			group  string
			leaves int
		}
		anchors := map[*Cell]anchor{}
		for _, name := range names {
			on := map[*Cell]int{}
			for _, pod := range k.groups[name].placement {
				for _, l := range pod {
					on[l.nodeCell]++
				}
			}
			for node, n := range on {
				if a, ok := anchors[node]; !ok || n < a.leaves {
					anchors[node] = anchor{name, n}
				}
			}
		}
		keepers := map[string]bool{}
		for _, a := range anchors {
			keepers[a.group] = true
		}
		kept := names[:0]
		for _, name := range names {
			if keepers[name] || r.Float64() < keep {
				kept = append(kept, name)
			} else if _, err := k.DeleteAffinityGroup(name); err != nil {
				b.Fatal(err)
			}
		}
		names = kept
	}
	gangs := [][2]int32{{1, 1}, {1, 2}, {1, 3}, {2, 1}, {3, 1}, {2, 2}}
	var reserved int32
	for i, v := range vcs {
		leaves := vcLeaves(b, k, v)
		reserved += leaves
		if i >= 2 {
			leaves = leaves * 85 / 100
		}
		fill(v.Name, false, gangs, leaves)
	}
	thin(0.3)
	names = names[:0]
	small := [][2]int32{{1, 1}, {1, 2}, {2, 1}, {1, 4}}
	fill(vcs[0].Name, true, small, int32(nodes*8)-reserved+reserved/20)
	thin(0.5)
	return k
}

// vcLeaves is the leaf cells of a VC's virtual cells.
func vcLeaves(b *testing.B, k *Core, v VirtualClusterSpec) int32 {
	var leaves int32
	for _, c := range v.VirtualCells {
		ch, l, err := k.resolveCellType(c.CellType)
		if err != nil {
			b.Fatal(err)
		}
		leaves += c.CellNumber * ch.leafCount[l]
	}
	return leaves
}

// BenchmarkFragmented measures decisions in fragmentedCore at 10k nodes,
// of guaranteed groups of priority 0 (they may preempt only opportunistic
// groups) and of opportunistic ones.
//
//   - place: a group of each shape in turn in every VC where it is placed
//     (tried when the cluster is built), then deleted. Every bound cell
//     fails a gang of whole nodes at its first levels.
//   - opportunistic: an opportunistic group of each shape, then deleted:
//     the free pool's nodes are all partly used.
//   - wait: groups that can neither be placed nor preempt (every shape
//     that waits in each VC), each retried in turn; before each retry a
//     1x1 group is placed and deleted in the same VC, so that no decision
//     finds the VC as the previous one left it. p50-ns and p99-ns are the
//     wait decision alone; ns/op and allocs/op include the churn.
//   - retry: the same waiting groups retried with nothing changed in
//     between, as the members of one gang are.
func BenchmarkFragmented(b *testing.B) {
	const nodes = 10000
	k := fragmentedCore(b, nodes)
	vcs := []string{"vc-a", "vc-b", "vc-c", "vc-d"}
	// kinds sorts a group of each shape and priority in each VC by the
	// decision it gets.
	kinds := func(name string, prio int32, shapes [][2]int32) (placed, waiting []AffinityGroupSpec) {
		for _, vc := range vcs {
			for _, sh := range shapes {
				s := ag(fmt.Sprintf("%s-%s-%dx%d", name, vc, sh[0], sh[1]), vc, prio, sh[0], sh[1])
				d, err := k.Schedule(s)
				if err != nil {
					b.Fatal(err)
				}
				if d.Kind == Wait {
					waiting = append(waiting, s)
					continue
				}
				if d.Kind == Placed {
					placed = append(placed, s)
				}
				if _, err := k.DeleteAffinityGroup(s.Name); err != nil {
					b.Fatal(err)
				}
			}
		}
		return placed, waiting
	}
	for _, run := range []struct {
		name   string
		prio   int32
		shapes [][2]int32
	}{
		{"place", 0, [][2]int32{{1, 1}, {1, 8}, {4, 8}, {8, 8}}},
		{"opportunistic", OpportunisticPriority, [][2]int32{{1, 1}, {1, 8}, {4, 8}}},
	} {
		for _, sh := range run.shapes {
			placed, waiting := kinds("try", run.prio, [][2]int32{sh})
			for _, s := range waiting {
				if _, err := k.DeleteAffinityGroup(s.Name); err != nil {
					b.Fatal(err)
				}
			}
			if len(placed) == 0 {
				continue
			}
			b.Run(fmt.Sprintf("nodes=%d/%s/shape=%dx%d", nodes, run.name, sh[0], sh[1]), func(b *testing.B) {
				benchPlacements(b, k, func(i int) AffinityGroupSpec {
					s := placed[i%len(placed)]
					s.Name = "bench"
					return s
				})
				b.ReportMetric(float64(len(placed)), "vcs")
			})
		}
	}
	_, waiting := kinds("wait", 0, [][2]int32{{1, 8}, {2, 8}, {4, 8}, {8, 8}, {16, 8}, {4, 4}})
	if len(waiting) == 0 {
		b.Fatal("no group waits in the fragmented cluster")
	}
	for _, churn := range []bool{true, false} {
		name := map[bool]string{true: "wait", false: "retry"}[churn]
		b.Run(fmt.Sprintf("nodes=%d/%s", nodes, name), func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s := waiting[i%len(waiting)]
				if churn {
					c := ag("churn", s.VirtualCluster, 0, 1, 1)
					if _, err := k.Schedule(c); err != nil {
						b.Fatal(err)
					}
					if _, err := k.DeleteAffinityGroup(c.Name); err != nil {
						b.Fatal(err)
					}
				}
				t0 := time.Now()
				d, err := k.Schedule(s)
				lat = append(lat, time.Since(t0))
				if err != nil || d.Kind != Wait {
					b.Fatalf("want a wait: %v %+v", err, d)
				}
			}
			b.StopTimer()
			reportLatency(b, lat)
			b.ReportMetric(float64(len(waiting)), "groups")
		})
	}
}
