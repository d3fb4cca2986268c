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
	// place tries to start r now.
	place(r *run) (outcome, error)
	// finish frees what r held.
	finish(r *run)
	// nodes is every node's leaf cell capacity.
	nodes() map[string]int32
	// headroom is how many leaf cells vc may still take for guaranteed
	// jobs by count (its quota, or its cells, less what its guaranteed jobs
	// hold). A job refused while its GPUs fit the headroom waited for the
	// shape of free GPUs, not for its VC's own jobs (lost affinity).
	headroom(vc string) int64
	// setNodeUp marks a node failed (false) or repaired (true); the engine
	// has stopped the runs on it first.
	setNodeUp(node string, up bool) error
	// topology is the cluster's keyed domains (topology.go).
	topology() *topology
}

// outcome is what place decided.
type outcome struct {
	pods []podAt
	// victims are the runs it stopped to make room (also when it then
	// could not start r); downgraded are lazily preempted runs that go on
	// running as opportunistic.
	victims, downgraded []string
	ok                  bool
}

// podAt is where one pod of a job runs.
type podAt struct {
	node   string
	leaves int32
}

// block is a stretch of time a run waited for one reason: from its first
// refusal for that reason to the next refusal for another (or its start).
type block struct {
	from, to float64
	// fits: its VC had the headroom for its GPUs, so it waited for their
	// shape; down: some node was down at the time.
	fits, down bool
}

// run is one job in the simulation; a preempted or interrupted job runs
// again from the start under a new attempt name.
type run struct {
	job         *Job
	attempt     int
	name        string
	gen         int // invalidates a stopped run's finish event
	started     bool
	start       float64
	end         float64
	pods        []podAt
	preempts    int // times it was preempted
	interrupted int // times a node failure stopped it
	downgraded  bool
	lostWork    float64 // GPU-seconds of runs stopped before they finished
	blocks      []block
	// split: a run of this job (which must stay inside one domain,
	// Job.Within) was placed across domains (topology-blind policies).
	split bool
	// ranOn is where its last run's pods were (pods is cleared when the
	// run stops).
	ranOn   []podAt
	invalid string
}

func (r *run) rename() { r.name = fmt.Sprintf("%s#%d", r.job.ID, r.attempt) }

// refused records that r could not start at now, and why.
func (r *run) refused(now float64, fits, down bool) {
	if n := len(r.blocks); n > 0 {
		b := &r.blocks[n-1]
		b.to = now
		if b.fits == fits && b.down == down {
			return
		}
	}
	r.blocks = append(r.blocks, block{from: now, to: now, fits: fits, down: down})
}

type eventKind int8

// Events at the same instant: finishes first (they free cells), then
// repairs, failures, and arrivals last (they see the freshest state).
const (
	evFinish eventKind = iota
	evNodeUp
	evNodeDown
	evArrive
)

type event struct {
	at   float64
	kind eventKind
	r    *run
	gen  int
	node string
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	if h[i].kind != h[j].kind {
		return h[i].kind < h[j].kind
	}
	if h[i].r != nil && h[j].r != nil {
		return h[i].r.job.ID < h[j].r.job.ID
	}
	return h[i].node < h[j].node
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
	// Samples of the cluster every SampleEvery seconds from 0 to the end of
	// the simulation: GPUs in use, free GPUs no waiting job's pod fits, GPUs
	// in use plus those the waiting jobs ask (demand), GPUs on failed nodes.
	SampleEvery float64
	Used        []int64
	Fragmented  []int64
	Demand      []int64
	Down        []int64
	// SubmitSamples is how many samples fall up to the last submission.
	SubmitSamples int
	TotalGPUs     int64
	Preemptions   int
	Downgrades    int
	NodeFailures  int
	Interruptions int
	// Domains: per topology key that some job of the trace must stay
	// within, its domains' samples (domainIdle); nil without such jobs.
	Domains map[string]*DomainSamples
}

// DomainSamples are one topology key's domains over time, at the same
// samples as Used: GPUs idle inside fragmented domains (free, in domains
// that can host none of the waiting within-jobs of the key, while one
// waits) and free GPUs in partly used domains (no whole-domain job fits
// there); GPUs is all the domains' GPUs.
type DomainSamples struct {
	Domains    int
	GPUs       int64
	Fragmented []int64
	Partial    []int64
}

// simulate runs jobs through p with a virtual clock. Every time something
// happens (a job arrives or finishes, a node fails or comes back), the
// waiting jobs are offered to the policy in order: higher priority first,
// then earlier submission. A job that cannot start does not hold back
// smaller ones behind it (as the scheduler's queue does not); shapes that
// failed in a pass are not asked again in the same pass (the state has not
// changed for them). outages, if any, take nodes down and up again: the
// runs on a failed node are stopped and requeued (they start over, as a
// failed job resubmitted does).
func simulate(policy string, p placer, jobs []Job, sampleEvery float64, outages []outage) (*Result, error) {
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
	down := map[string]bool{}
	var usedGPUs, downGPUs int64
	h := &eventHeap{}
	runs := make([]*run, len(jobs))
	byName := map[string]*run{}
	onNode := map[string]map[*run]bool{} // running runs per node, for failures
	for i := range jobs {
		r := &run{job: &jobs[i]}
		r.rename()
		runs[i] = r
		heap.Push(h, event{at: jobs[i].Submit, kind: evArrive, r: r})
	}
	for _, o := range outages {
		if _, ok := caps[o.node]; !ok {
			return nil, fmt.Errorf("%s: failure of node %q, which is not in the cluster", policy, o.node)
		}
		heap.Push(h, event{at: o.from, kind: evNodeDown, node: o.node})
		heap.Push(h, event{at: o.to, kind: evNodeUp, node: o.node})
	}
	res.Runs = runs
	topo := p.topology()
	var keys []string // the keys some job must stay within, that name domains
	for i := range jobs {
		if k := jobs[i].Within; k != "" && len(topo.domains[k]) > 0 && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if len(keys) > 0 {
		res.Domains = map[string]*DomainSamples{}
		for _, k := range keys {
			ds := &DomainSamples{Domains: len(topo.domains[k])}
			for _, d := range topo.domains[k] {
				ds.GPUs += d.gpus
			}
			res.Domains[k] = ds
		}
	}
	nodeFree := func(n string) int32 {
		if down[n] {
			return 0
		}
		return caps[n] - used[n]
	}
	nodeUsed := func(n string) int32 {
		if down[n] {
			return 0
		}
		return used[n]
	}
	lastSubmit := 0.0
	if len(jobs) > 0 {
		lastSubmit = jobs[len(jobs)-1].Submit
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
	var pendingGPUs int64
	enqueue := func(r *run) {
		i, _ := slices.BinarySearchFunc(pending, r, less)
		pending = slices.Insert(pending, i, r)
		pendingGPUs += r.job.GPUs()
	}
	dequeue := func(i int) {
		pendingGPUs -= pending[i].job.GPUs()
		pending = slices.Delete(pending, i, i+1)
	}
	stop := func(r *run) {
		for _, pa := range r.pods {
			used[pa.node] -= pa.leaves
			usedGPUs -= int64(pa.leaves)
			delete(onNode[pa.node], r)
		}
		r.pods = nil
		delete(byName, r.name)
	}
	// requeue puts a stopped run back in the queue as a new attempt.
	requeue := func(r *run, now float64) {
		r.lostWork += (now - r.start) * float64(r.job.GPUs())
		r.gen++
		r.started = false
		r.downgraded = false
		r.attempt++
		r.rename()
		enqueue(r)
	}
	nextSample := 0.0
	sample := func(upTo float64) {
		for nextSample <= upTo {
			res.Used = append(res.Used, usedGPUs)
			res.Demand = append(res.Demand, usedGPUs+pendingGPUs)
			res.Down = append(res.Down, downGPUs)
			if nextSample <= lastSubmit {
				res.SubmitSamples++
			}
			var frag int64
			if len(pending) > 0 {
				smallest := pending[0].job.Leaves
				for _, r := range pending {
					smallest = min(smallest, r.job.Leaves)
				}
				for _, n := range names {
					if free := caps[n] - used[n]; free > 0 && free < smallest && !down[n] {
						frag += int64(free)
					}
				}
			}
			res.Fragmented = append(res.Fragmented, frag)
			for _, k := range keys {
				var waiting []domainShape
				for _, r := range pending {
					s := domainShape{pods: r.job.Pods, leaves: r.job.Leaves, leafType: r.job.LeafType}
					if r.job.Within == k && !slices.Contains(waiting, s) {
						waiting = append(waiting, s)
					}
				}
				f, part := domainIdle(topo.domains[k], nodeFree, nodeUsed, waiting)
				ds := res.Domains[k]
				ds.Fragmented = append(ds.Fragmented, f)
				ds.Partial = append(ds.Partial, part)
			}
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
	now := 0.0
	for h.Len() > 0 {
		now = (*h)[0].at
		sample(now - 1e-9)
		for h.Len() > 0 && (*h)[0].at == now {
			e := heap.Pop(h).(event)
			switch e.kind {
			case evFinish:
				if e.gen != e.r.gen {
					continue // stopped since
				}
				e.r.end = now
				p.finish(e.r)
				stop(e.r)
			case evNodeDown:
				if down[e.node] {
					continue
				}
				res.NodeFailures++
				victims := make([]*run, 0, len(onNode[e.node]))
				for r := range onNode[e.node] {
					victims = append(victims, r)
				}
				slices.SortFunc(victims, func(a, b *run) int { return cmpString(a.name, b.name) })
				for _, r := range victims {
					p.finish(r)
					stop(r)
					r.interrupted++
					res.Interruptions++
					requeue(r, now)
				}
				down[e.node] = true
				downGPUs += int64(caps[e.node])
				if err := p.setNodeUp(e.node, false); err != nil {
					return nil, fmt.Errorf("%s: node %s down: %w", policy, e.node, err)
				}
			case evNodeUp:
				if !down[e.node] {
					continue
				}
				delete(down, e.node)
				downGPUs -= int64(caps[e.node])
				if err := p.setNodeUp(e.node, true); err != nil {
					return nil, fmt.Errorf("%s: node %s up: %w", policy, e.node, err)
				}
			default:
				enqueue(e.r)
			}
		}
		failed := map[shape]bool{}
		anyDown := len(down) > 0
		for i := 0; i < len(pending); {
			r := pending[i]
			key := shape{r.job.VC, r.job.Priority, r.job.Pods, r.job.Leaves, r.job.LeafType}
			if failed[key] {
				r.refused(now, r.job.Priority >= 0 && p.headroom(r.job.VC) >= r.job.GPUs(), anyDown)
				i++
				continue
			}
			o, err := p.place(r)
			for _, v := range o.victims {
				vr := byName[v]
				if vr == nil {
					return nil, fmt.Errorf("%s: %s preempted %s, which is not running", policy, r.name, v)
				}
				stop(vr)
				vr.preempts++
				res.Preemptions++
				requeue(vr, now)
				if idx := slices.Index(pending, r); idx >= 0 {
					i = idx // the victim may have been queued before r
				}
			}
			for _, v := range o.downgraded {
				if vr := byName[v]; vr != nil && !vr.downgraded {
					vr.downgraded = true
					res.Downgrades++
				}
			}
			if err != nil {
				r.invalid = err.Error()
				dequeue(i)
				continue
			}
			if !o.ok {
				failed[key] = true
				r.refused(now, r.job.Priority >= 0 && p.headroom(r.job.VC) >= r.job.GPUs(), anyDown)
				i++
				continue
			}
			dequeue(i)
			r.started, r.start, r.pods, r.ranOn = true, now, o.pods, o.pods
			if r.job.Within != "" && topo.split(r.job.Within, o.pods) {
				r.split = true
			}
			if n := len(r.blocks); n > 0 {
				r.blocks[n-1].to = now
			}
			byName[r.name] = r
			for _, pa := range o.pods {
				used[pa.node] += pa.leaves
				usedGPUs += int64(pa.leaves)
				if onNode[pa.node] == nil {
					onNode[pa.node] = map[*run]bool{}
				}
				onNode[pa.node][r] = true
			}
			heap.Push(h, event{at: now + r.job.Duration, kind: evFinish, r: r, gen: r.gen})
		}
	}
	sample(now)
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
