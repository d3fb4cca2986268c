// Package sim is hivesched-sim: a discrete-event simulator that drives the
// real cell core (plugins/cellcore) and two baselines through a job trace,
// to show what cells and buddy allocation promise that a GPU-count quota
// cannot ("sharing safety", HiveD OSDI'20), and to ask "what if" before an
// operator changes VCs.
package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Job is one job of a trace: a gang of Pods pods of Leaves leaf cells
// (GPUs) each, submitted at Submit, running for Duration once all its pods
// start (seconds).
type Job struct {
	ID       string
	Submit   float64
	Duration float64
	VC       string
	Priority int32
	Pods     int32
	Leaves   int32  // per pod
	LeafType string // "" any
	// Lazy: when preempted, run on as opportunistic instead of being
	// stopped (HiveD's lazy preemption; hivesched only).
	Lazy bool
	// Within: all the job's pods must stay inside one domain of this node
	// label key (a cell type's topologyKey, e.g. nvidia.com/gpu.clique for
	// an NVL72 rack's NVLink domain); "" none. The cell core gets it as
	// WithinTopologyKey; quota-one-clique places the job in one domain;
	// the other quota baselines ignore it and the report counts the jobs
	// they split across domains.
	Within string
}

// GPUs is the job's total leaf cells.
func (j *Job) GPUs() int64 { return int64(j.Pods) * int64(j.Leaves) }

// CSVHeader is the trace format's header line (docs/simulator.md). The
// last two columns are optional (older traces have 8 or 9).
var CSVHeader = []string{"id", "submit_seconds", "duration_seconds", "virtual_cluster", "priority", "pods", "leaf_cells_per_pod", "leaf_cell_type", "lazy_preemption", "within_topology_key"}

// csvRequired is how many columns every line has.
const csvRequired = 8

// ReadCSV reads a trace. Errors name the line and the column.
func ReadCSV(r io.Reader) ([]Job, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	var jobs []Job
	seen := map[string]int{}
	line := 0
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		line++
		if err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		if line == 1 && len(rec) > 0 && strings.TrimSpace(rec[0]) == CSVHeader[0] {
			continue
		}
		ln, _ := cr.FieldPos(0)
		if len(rec) < csvRequired || len(rec) > len(CSVHeader) {
			return nil, fmt.Errorf("trace line %d: %d fields, want %d to %d (%s)", ln, len(rec), csvRequired, len(CSVHeader), strings.Join(CSVHeader, ","))
		}
		f := func(i int) string { return strings.TrimSpace(rec[i]) }
		num := func(i int, min float64) (float64, error) {
			v, err := strconv.ParseFloat(f(i), 64)
			if err != nil || v < min || v != v {
				return 0, fmt.Errorf("trace line %d: %s %q must be a number >= %g", ln, CSVHeader[i], f(i), min)
			}
			return v, nil
		}
		count := func(i int, lo, hi int64) (int64, error) {
			v, err := strconv.ParseInt(f(i), 10, 32)
			if err != nil || v < lo || v > hi {
				return 0, fmt.Errorf("trace line %d: %s %q must be an integer from %d to %d", ln, CSVHeader[i], f(i), lo, hi)
			}
			return v, nil
		}
		j := Job{ID: f(0), VC: f(3), LeafType: f(7)}
		if j.ID == "" || j.VC == "" {
			return nil, fmt.Errorf("trace line %d: id and virtual_cluster must not be empty", ln)
		}
		if prev, dup := seen[j.ID]; dup {
			return nil, fmt.Errorf("trace line %d: id %q is used on line %d too", ln, j.ID, prev)
		}
		seen[j.ID] = ln
		var e error
		var v int64
		if j.Submit, e = num(1, 0); e != nil {
			return nil, e
		}
		if j.Duration, e = num(2, 0); e != nil {
			return nil, e
		}
		if v, e = count(4, -1, 1000); e != nil {
			return nil, e
		}
		j.Priority = int32(v)
		if v, e = count(5, 1, 10000); e != nil {
			return nil, e
		}
		j.Pods = int32(v)
		if v, e = count(6, 1, 1<<20); e != nil {
			return nil, e
		}
		j.Leaves = int32(v)
		if len(rec) > 8 {
			switch f(8) {
			case "", "false", "0":
			case "true", "1":
				j.Lazy = true
			default:
				return nil, fmt.Errorf("trace line %d: lazy_preemption %q must be true or false", ln, f(8))
			}
		}
		if len(rec) > 9 {
			j.Within = f(9)
			if strings.ContainsAny(j.Within, " \t") {
				return nil, fmt.Errorf("trace line %d: within_topology_key %q must be a node label key", ln, j.Within)
			}
		}
		jobs = append(jobs, j)
	}
	SortJobs(jobs)
	return jobs, nil
}

// SortJobs orders a trace by submission (stable: ties keep file order).
func SortJobs(jobs []Job) {
	slices.SortStableFunc(jobs, func(a, b Job) int {
		switch {
		case a.Submit < b.Submit:
			return -1
		case a.Submit > b.Submit:
			return 1
		}
		return 0
	})
}

// WriteCSV writes a trace in the format ReadCSV reads. The
// within_topology_key column is written only if some job has one (a trace
// without is written as before it existed).
func WriteCSV(w io.Writer, jobs []Job) error {
	cw := csv.NewWriter(w)
	cols := len(CSVHeader) - 1
	if hasWithin(jobs) {
		cols++
	}
	if err := cw.Write(CSVHeader[:cols]); err != nil {
		return err
	}
	for _, j := range jobs {
		rec := []string{j.ID, strconv.FormatFloat(j.Submit, 'f', -1, 64), strconv.FormatFloat(j.Duration, 'f', -1, 64),
			j.VC, strconv.Itoa(int(j.Priority)), strconv.Itoa(int(j.Pods)), strconv.Itoa(int(j.Leaves)), j.LeafType, strconv.FormatBool(j.Lazy), j.Within}
		if err := cw.Write(rec[:cols]); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// hasWithin says whether some job must stay inside one domain.
func hasWithin(jobs []Job) bool {
	for i := range jobs {
		if jobs[i].Within != "" {
			return true
		}
	}
	return false
}
