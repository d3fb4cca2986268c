package cellcore

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkReplacePhysicalCluster measures ReplacePhysicalCluster on
// halfFullCore's cluster (VCs of racks and nodes, each half full of gangs,
// the free cells half full of opportunistic groups: thousands of groups):
// "same" replaces the cluster with the same configuration, "add-rack"
// alternately adds a rack and takes it away again (applied each time).
// build-ns is New(cfg) alone, the part of the call made before the lock
// is taken: ns/op minus build-ns is what the call holds the lock for.
func BenchmarkReplacePhysicalCluster(b *testing.B) {
	for _, nodes := range []int{1000, 10000} {
		k := halfFullCore(b, nodes)
		base := benchConfig(nodes)
		bigger := benchConfig(nodes)
		var names []string
		for j := 0; j < 8; j++ {
			names = append(names, fmt.Sprintf("extra-n%d", j))
		}
		bigger.PhysicalCells = append(bigger.PhysicalCells, rackSpec("extra", names))
		for _, c := range []struct {
			name string
			cfgs []Config
		}{{"same", []Config{base}}, {"add-rack", []Config{bigger, base}}} {
			b.Run(fmt.Sprintf("nodes=%d/%s", nodes, c.name), func(b *testing.B) {
				var build time.Duration
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					res, err := k.ReplacePhysicalCluster(c.cfgs[i%len(c.cfgs)])
					if err != nil || !res.Applied {
						b.Fatalf("%+v %v", res, err)
					}
				}
				b.StopTimer()
				for i := 0; i < 3; i++ {
					t0 := time.Now()
					if _, err := New(base); err != nil {
						b.Fatal(err)
					}
					build += time.Since(t0)
				}
				b.ReportMetric(float64(build.Nanoseconds())/3, "build-ns")
				if err := k.CheckInvariants(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			})
			if _, err := k.ReplacePhysicalCluster(base); err != nil {
				b.Fatal(err)
			}
		}
	}
}
