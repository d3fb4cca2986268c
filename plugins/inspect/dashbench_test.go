package inspect

import (
	"encoding/json"
	"io"
	"testing"
)

// BenchmarkDashboardAnswers: what the page's polls cost to build at 10,000
// nodes (half full, 5,000 groups): each is built at most once a second
// (TreeCacheTTL) whatever the number of pages.
func BenchmarkDashboardAnswers(b *testing.B) {
	p := testServer(b, 10000)
	for name, build := range map[string]func() any{
		"cellmap":         func() any { return encodeCellMap(p.cellMap()) },
		"groups":          func() any { return p.groupList(true) },
		"virtualclusters": func() any { return p.virtualClusters("") },
		"leafcounts":      func() any { return p.leafCounts() },
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				v := build()
				if e, ok := v.(*encoded); ok {
					b.ReportMetric(float64(len(e.body)), "json-bytes")
					continue
				}
				_ = json.NewEncoder(io.Discard).Encode(v)
			}
		})
	}
}
