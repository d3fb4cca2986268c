package sim

import (
	"container/heap"
	"fmt"
	"slices"
)

// placer is a scheduling policy on one cluster: it starts a job (all its
// pods at once) or says it must wait, and may preempt running jobs to start
// it (they are returned; the engine requeues them).
type placer interface {
	// place tries to start r now. victims are the names of the runs it
	// stopped to make room (also when it then could not start r).
	place(r *run) (pods []podAt, victims []string, ok bool, err error)
	// finish frees what r held.
	finish(r *run)
	// nodes is every node's leaf cell capacity.
	nodes() map[string]int32
}

// podAt is where one pod of a job runs.
type podAt struct {
	node   string
	leaves int32
}

// run is one job in the simulation; a preempted job runs again from the
// start under a new attempt name.
type run struct {
	job      *Job
	attempt  int
	name     string
	gen      int // invalidates a preempted run's finish event
	started  bool
	start    float64
	end      float64
	pods     []podAt
	preempts int // times it was preempted
	invalid  string
}

func (r *run) rename() { r.name = fmt.Sprintf("%s#%d", r.job.ID, r.attempt) }

type event struct {
	at     float64
	finish bool // finishes sort before arrivals at the same time
	r      *run
	gen    int
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	if h[i].finish != h[j].finish {
		return h[i].finish
	}
	return h[i].r.job.ID < h[j].r.job.ID
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// Result is one policy's run of a trace.
type Result struct {
	Policy string
	Runs   []*run // in trace order
	// Samples of the cluster every SampleEvery seconds up to the last
	// submission: GPUs in use, and free GPUs no waiting job's pod fits.
	SampleEvery float64
	Used        []int64
	Fragmented  []int64
	TotalGPUs   int64
	Preemptions int
}

// simulate runs jobs through p with a virtual clock. Every time something
// happens (a job arrives or finishes), the waiting jobs are offered to the
// policy in order: higher priority first, then earlier submission. A job
// that cannot start does not hold back smaller ones behind it (as the
// scheduler's queue does not); shapes that failed in a pass are not asked
// again in the same pass (the state has not changed for them).
func simulate(policy string, p placer, jobs []Job, sampleEvery float64) (*Result, error) {
	caps := p.nodes()
	names := make([]string, 0, len(caps))
	var total int64
	for n, c := range caps {
		names = append(names, n)
		total += int64(c)
	}
	slices.Sort(names)
	res := &Result{Policy: policy, SampleEvery: sampleEvery, TotalGPUs: total}
	used := make(map[string]int32, len(caps))
	var usedGPUs int64
	h := &eventHeap{}
	runs := make([]*run, len(jobs))
	byName := map[string]*run{}
	for i := range jobs {
		r := &run{job: &jobs[i]}
		r.rename()
		runs[i] = r
		heap.Push(h, event{at: jobs[i].Submit, r: r})
	}
	res.Runs = runs
	horizon := 0.0
	if len(jobs) > 0 {
		horizon = jobs[len(jobs)-1].Submit
	}
	var pending []*run
	less := func(a, b *run) int {
		switch {
		case a.job.Priority != b.job.Priority:
			return int(b.job.Priority - a.job.Priority)
		case a.job.Submit != b.job.Submit:
			if a.job.Submit < b.job.Submit {
				return -1
			}
			return 1
		}
		return cmpString(a.job.ID, b.job.ID)
	}
	enqueue := func(r *run) {
		i, _ := slices.BinarySearchFunc(pending, r, less)
		pending = slices.Insert(pending, i, r)
	}
	stop := func(r *run, now float64) {
		for _, pa := range r.pods {
			used[pa.node] -= pa.leaves
			usedGPUs -= int64(pa.leaves)
		}
		r.pods = nil
		delete(byName, r.name)
	}
	nextSample := 0.0
	sample := func(upTo float64) {
		for nextSample <= upTo && nextSample <= horizon {
			res.Used = append(res.Used, usedGPUs)
			var frag int64
			if len(pending) > 0 {
				smallest := pending[0].job.Leaves
				for _, r := range pending {
					smallest = min(smallest, r.job.Leaves)
				}
				for _, n := range names {
					if free := caps[n] - used[n]; free > 0 && free < smallest {
						frag += int64(free)
					}
				}
			}
			res.Fragmented = append(res.Fragmented, frag)
			nextSample += sampleEvery
		}
	}
	type shape struct {
		vc       string
		prio     int32
		pods     int32
		leaves   int32
		leafType string
	}
	for h.Len() > 0 {
		now := (*h)[0].at
		sample(now - 1e-9)
		for h.Len() > 0 && (*h)[0].at == now {
			e := heap.Pop(h).(event)
			if e.finish {
				if e.gen != e.r.gen {
					continue // preempted since
				}
				e.r.end = now
				p.finish(e.r)
				stop(e.r, now)
				continue
			}
			enqueue(e.r)
		}
		failed := map[shape]bool{}
		for i := 0; i < len(pending); {
			r := pending[i]
			key := shape{r.job.VC, r.job.Priority, r.job.Pods, r.job.Leaves, r.job.LeafType}
			if failed[key] {
				i++
				continue
			}
			pods, victims, ok, err := p.place(r)
			for _, v := range victims {
				vr := byName[v]
				if vr == nil {
					return nil, fmt.Errorf("%s: %s preempted %s, which is not running", policy, r.name, v)
				}
				stop(vr, now)
				vr.gen++
				vr.started = false
				vr.preempts++
				vr.attempt++
				vr.rename()
				res.Preemptions++
				enqueue(vr)
				if idx := slices.Index(pending, r); idx >= 0 {
					i = idx // the victim may have been queued before r
				}
			}
			if err != nil {
				r.invalid = err.Error()
				pending = slices.Delete(pending, i, i+1)
				continue
			}
			if !ok {
				failed[key] = true
				i++
				continue
			}
			pending = slices.Delete(pending, i, i+1)
			r.started, r.start, r.pods = true, now, pods
			byName[r.name] = r
			for _, pa := range pods {
				used[pa.node] += pa.leaves
				usedGPUs += int64(pa.leaves)
			}
			heap.Push(h, event{at: now + r.job.Duration, finish: true, r: r, gen: r.gen})
		}
	}
	sample(horizon)
	for _, r := range pending {
		if r.invalid == "" {
			r.invalid = "never started"
		}
	}
	return res, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
