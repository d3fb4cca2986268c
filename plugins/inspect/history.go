package inspect

import (
	"sort"
	"sync"
	"time"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
)

// The history of the VCs' leaf counts: a sample every HistoryInterval,
// HistorySamples of them (an hour), for at most HistoryVCs VCs. Memory is
// bounded: 240 samples of 8 counters for 512 VCs are 4 MB at most.
const (
	HistoryInterval = 15 * time.Second
	HistorySamples  = 240
	HistoryVCs      = 512
)

// history is a ring of samples.
type history struct {
	mu    sync.Mutex
	size  int
	times []time.Time                 // ring
	vcs   map[string][]iv1.LeafCounts // rings aligned with times
	next  int                         // where the next sample goes
}

func newHistory(size int) *history {
	return &history{size: size, vcs: map[string][]iv1.LeafCounts{}}
}

// add appends a sample; VCs missing from counts get zeros, and a VC absent
// for a whole window is forgotten.
func (h *history) add(at time.Time, counts map[string]iv1.LeafCounts) {
	h.mu.Lock()
	defer h.mu.Unlock()
	pos := h.next // before the ring is full, also len(h.times)
	if len(h.times) < h.size {
		h.times = append(h.times, at)
	} else {
		h.times[pos] = at
	}
	n := len(h.times)
	set := func(name string, c iv1.LeafCounts) []iv1.LeafCounts {
		ring := h.vcs[name]
		for len(ring) < n {
			ring = append(ring, iv1.LeafCounts{})
		}
		ring[pos] = c
		h.vcs[name] = ring
		return ring
	}
	for name, c := range counts {
		if _, ok := h.vcs[name]; ok || len(h.vcs) < HistoryVCs {
			set(name, c)
		}
	}
	for name := range h.vcs {
		if _, ok := counts[name]; !ok && allZero(set(name, iv1.LeafCounts{})) {
			delete(h.vcs, name)
		}
	}
	h.next = (pos + 1) % h.size
}

func allZero(ring []iv1.LeafCounts) bool {
	for _, c := range ring {
		if c != (iv1.LeafCounts{}) {
			return false
		}
	}
	return true
}

// snapshot copies the samples oldest first.
func (h *history) snapshot(interval time.Duration) iv1.History {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.times)
	start := 0
	if n == h.size {
		start = h.next
	}
	out := iv1.History{IntervalSeconds: int(interval / time.Second), Times: make([]time.Time, 0, n), VirtualClusters: map[string][]iv1.LeafCounts{}}
	for k := 0; k < n; k++ {
		out.Times = append(out.Times, h.times[(start+k)%n])
	}
	names := make([]string, 0, len(h.vcs))
	for name := range h.vcs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ring := h.vcs[name]
		s := make([]iv1.LeafCounts, 0, n)
		for k := 0; k < n; k++ {
			s = append(s, ring[(start+k)%n])
		}
		out.VirtualClusters[name] = s
	}
	return out
}
