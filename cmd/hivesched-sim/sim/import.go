package sim

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Formats are the trace formats Import reads (docs/simulator.md, "Public
// traces").
var Formats = []string{"csv", "philly", "helios", "alibaba2020", "openb"}

// ImportStats says what an importer read, skipped and had to change: every
// result of an imported trace carries it.
type ImportStats struct {
	Format   string
	Read     int
	Imported int
	// Skipped and Changed count records by reason; Rounded counts pods
	// whose fractional GPU request (GPU sharing) was rounded up to a whole
	// GPU: the simulator allocates whole leaf cells.
	Skipped map[string]int
	Changed map[string]int
	Rounded int
}

func newStats(format string) *ImportStats {
	return &ImportStats{Format: format, Skipped: map[string]int{}, Changed: map[string]int{}}
}

// Notes are the stats as sentences, biggest counts first.
func (s *ImportStats) Notes() []string {
	out := []string{fmt.Sprintf("%s: %d records read, %d jobs imported", s.Format, s.Read, s.Imported)}
	add := func(m map[string]int, verb string) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int {
			if m[a] != m[b] {
				return m[b] - m[a]
			}
			return strings.Compare(a, b)
		})
		for _, k := range keys {
			out = append(out, fmt.Sprintf("%s %d: %s", verb, m[k], k))
		}
	}
	if s.Rounded > 0 {
		out = append(out, fmt.Sprintf("rounded up %d pods: GPU-sharing (fractional GPU) requests rounded up to whole GPUs", s.Rounded))
	}
	add(s.Skipped, "skipped")
	add(s.Changed, "changed")
	return out
}

// Import reads a trace in one of Formats. files: the trace (for
// alibaba2020 the job table, then the task table). vcMap renames the
// trace's VCs to VirtualCluster names.
func Import(format string, files []string, vcMap map[string]string) ([]Job, *ImportStats, error) {
	want := 1
	if format == "alibaba2020" {
		want = 2
	}
	if len(files) != want {
		return nil, nil, fmt.Errorf("format %s reads %d file(s), got %d (alibaba2020: -trace pai_job_table.csv -task-table pai_task_table.csv)", format, want, len(files))
	}
	var rs []io.Reader
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, nil, err
		}
		defer fh.Close()
		rs = append(rs, fh)
	}
	switch format {
	case "csv":
		jobs, err := ReadCSV(rs[0])
		st := newStats(format)
		st.Read, st.Imported = len(jobs), len(jobs)
		return jobs, st, err
	case "philly":
		return ReadPhilly(rs[0], vcMap, 0)
	case "helios":
		return ReadHelios(rs[0], vcMap)
	case "alibaba2020":
		return ReadAlibaba2020(rs[0], rs[1], vcMap)
	case "openb":
		return ReadOpenB(rs[0], vcMap)
	}
	return nil, nil, fmt.Errorf("unknown trace format %q (known: %s)", format, strings.Join(Formats, ", "))
}

// table reads a CSV whose columns are found by name in its header line
// (want: the names it needs). A file without a header (Alibaba's tables
// ship it in a separate .header file) is read by position when header is
// given.
type table struct {
	name string
	cr   *csv.Reader
	col  map[string]int
	rec  []string
	line int
}

func newTable(name string, r io.Reader, want, header []string) (*table, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	t := &table{name: name, cr: cr, col: map[string]int{}}
	first, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	names := header
	if header == nil || (len(first) > 0 && strings.TrimSpace(first[0]) == header[0]) {
		names = first
	} else {
		t.rec = first // data: the first record is a job
	}
	for i, n := range names {
		t.col[strings.TrimSpace(n)] = i
	}
	for _, w := range want {
		if _, ok := t.col[w]; !ok {
			return nil, fmt.Errorf("%s: no column %q (columns: %s)", name, w, strings.Join(names, ","))
		}
	}
	if t.rec == nil {
		t.line = 1
	}
	return t, nil
}

// next reads the next record (false at the end).
func (t *table) next() (bool, error) {
	if t.rec != nil && t.line == 0 {
		t.line = 1
		return true, nil
	}
	rec, err := t.cr.Read()
	if err == io.EOF {
		return false, nil
	}
	t.line++
	if err != nil {
		return false, fmt.Errorf("%s line %d: %w", t.name, t.line, err)
	}
	t.rec = rec
	return true, nil
}

func (t *table) str(c string) string {
	i := t.col[c]
	if i >= len(t.rec) {
		return ""
	}
	return strings.TrimSpace(t.rec[i])
}

// num reads a number; empty, "nan" and "None" are missing (ok false).
func (t *table) num(c string) (float64, bool, error) {
	s := t.str(c)
	switch strings.ToLower(s) {
	case "", "nan", "none", "null":
		return 0, false, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false, fmt.Errorf("%s line %d: %s %q is not a number", t.name, t.line, c, s)
	}
	return v, true, nil
}

func mapVC(vcMap map[string]string, vc string) string {
	if m, ok := vcMap[vc]; ok {
		return m
	}
	return vc
}

// rebase makes submission times seconds after the first submission, and
// orders the trace.
func rebase(jobs []Job) {
	if len(jobs) == 0 {
		return
	}
	first := jobs[0].Submit
	for _, j := range jobs {
		first = min(first, j.Submit)
	}
	for i := range jobs {
		jobs[i].Submit -= first
	}
	SortJobs(jobs)
}
