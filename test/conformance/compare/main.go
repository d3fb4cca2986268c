// Command compare puts the e2e suite's results on two scheduler profiles
// side by side (hack/conformance.sh, make conformance): one row per spec
// the focus selects, its state on each profile, and a verdict. It reads the
// ginkgo JSON reports the e2e binary writes with --report-dir and
// --report-complete-ginkgo (every spec, with its state and failure), not
// the log. It exits 1 when a spec passes on the stock profile and not on
// hivesched's ("default"): hivesched must schedule everything the stock
// profile does.
//
//	compare -focus REGEX -report stock=FILE -report default=FILE \
//	  [-seconds stock=N ...] [-skip-list FILE ...] [-out results.md]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/onsi/ginkgo/v2/types"
)

// Baseline and Candidate are the profile names the verdict compares.
const (
	Baseline  = "stock"
	Candidate = "default"
)

// Result is one spec's outcome on one profile.
type Result struct {
	State string // passed, failed, skipped, ... (ginkgo's state names); "" when not run
	Why   string // the failure or skip message, first line
}

// Row is one spec across profiles.
type Row struct {
	Spec    string
	Results map[string]Result
	Verdict string // PASS or FAIL, "" with fewer than both profiles
	Note    string
}

// SkipRule is one line of a skip list: specs matching Re are not run, for Why.
type SkipRule struct {
	Re  *regexp.Regexp
	Why string
}

// ParseSkipList reads "REGEX -- why" lines; # starts a comment line.
func ParseSkipList(r io.Reader) ([]SkipRule, error) {
	var rules []SkipRule
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		expr, why, ok := strings.Cut(line, " -- ")
		if !ok || strings.TrimSpace(why) == "" {
			return nil, fmt.Errorf("line %d: want 'REGEX -- why', got %q", n, line)
		}
		re, err := regexp.Compile(strings.TrimSpace(expr))
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		rules = append(rules, SkipRule{re, strings.TrimSpace(why)})
	}
	return rules, sc.Err()
}

// Specs returns the It specs of reports whose full text matches focus, by
// full text. Suite nodes (BeforeSuite, ReportAfterSuite, ...) are left out:
// they are not specs, though a failing BeforeSuite fails every spec anyway.
func Specs(reports []types.Report, focus *regexp.Regexp) map[string]Result {
	out := map[string]Result{}
	for _, r := range reports {
		for _, s := range r.SpecReports {
			if s.LeafNodeType != types.NodeTypeIt {
				continue
			}
			text := s.FullText()
			if !focus.MatchString(text) {
				continue
			}
			why, _, _ := strings.Cut(strings.TrimSpace(s.Failure.Message), "\n")
			out[text] = Result{State: s.State.String(), Why: why}
		}
	}
	return out
}

// Retried merges a re-run of some specs into a profile's results: a spec
// that passed on the re-run counts as passed, its note says so. The re-run
// is of the specs that passed on stock only (a timing flake on two busy
// cores must not fail the comparison; a real regression fails twice).
func Retried(results, retry map[string]Result) {
	for spec, r := range retry {
		if r.State == "passed" && results[spec].State != "passed" {
			results[spec] = Result{State: "passed", Why: "passed when re-run, after: " + results[spec].State + ": " + results[spec].Why}
		}
	}
}

// Compare builds the rows: every spec any profile reports, each profile's
// result (a skip-list rule's reason for specs skipped by it), and, when
// both the baseline and the candidate ran, the verdict. It returns the
// number of FAIL rows.
func Compare(profiles []string, results map[string]map[string]Result, skips []SkipRule) ([]Row, int) {
	specs := map[string]bool{}
	for _, rs := range results {
		for s := range rs {
			specs[s] = true
		}
	}
	names := make([]string, 0, len(specs))
	for s := range specs {
		names = append(names, s)
	}
	sort.Strings(names)
	_, haveBase := results[Baseline]
	_, haveCand := results[Candidate]
	var rows []Row
	fails := 0
	for _, s := range names {
		row := Row{Spec: s, Results: map[string]Result{}}
		for _, p := range profiles {
			res := results[p][s]
			if res.State == "skipped" {
				for _, rule := range skips {
					if rule.Re.MatchString(s) {
						res.Why = "skip list: " + rule.Why
						break
					}
				}
			}
			row.Results[p] = res
		}
		if haveBase && haveCand {
			base, cand := row.Results[Baseline].State, row.Results[Candidate].State
			switch {
			case base == "passed" && cand != "passed":
				row.Verdict, row.Note = "FAIL", "passes on stock only"
				fails++
			case base != "passed" && cand == "passed":
				row.Verdict, row.Note = "PASS", "passes on hivesched only"
			case base == "failed" && cand == "failed":
				row.Verdict, row.Note = "PASS", "fails on both"
			default:
				row.Verdict = "PASS"
			}
		}
		rows = append(rows, row)
	}
	return rows, fails
}

// Markdown writes the table, then each non-passing result's message.
func Markdown(w io.Writer, profiles []string, rows []Row, seconds map[string]string) {
	label := func(p string) string {
		if p == Candidate {
			return "hivesched (default)"
		}
		return p
	}
	fmt.Fprintf(w, "| spec |")
	for _, p := range profiles {
		fmt.Fprintf(w, " %s |", label(p))
	}
	fmt.Fprintf(w, " verdict |\n|---|")
	for range profiles {
		fmt.Fprintf(w, "---|")
	}
	fmt.Fprintf(w, "---|\n")
	counts := map[string]map[string]int{}
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |", cell(r.Spec))
		for _, p := range profiles {
			st := r.Results[p].State
			if st == "" {
				st = "not run"
			}
			if counts[p] == nil {
				counts[p] = map[string]int{}
			}
			counts[p][st]++
			fmt.Fprintf(w, " %s |", st)
		}
		v := r.Verdict
		if r.Note != "" {
			v += " (" + r.Note + ")"
		}
		fmt.Fprintf(w, " %s |\n", v)
	}
	fmt.Fprintln(w)
	for _, p := range profiles {
		var parts []string
		for _, st := range []string{"passed", "failed", "skipped", "not run"} {
			if n := counts[p][st]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, st))
			}
		}
		for st, n := range counts[p] {
			if st != "passed" && st != "failed" && st != "skipped" && st != "not run" {
				parts = append(parts, fmt.Sprintf("%d %s", n, st))
			}
		}
		t := ""
		if s, ok := seconds[p]; ok {
			t = fmt.Sprintf(", e2e run %s s", s)
		}
		fmt.Fprintf(w, "- %s: %s%s\n", label(p), strings.Join(parts, ", "), t)
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		for _, p := range profiles {
			res := r.Results[p]
			if res.State != "passed" && res.Why != "" {
				fmt.Fprintf(w, "- %s, %s %s: %s\n", cell(r.Spec), label(p), res.State, cell(res.Why))
			}
		}
	}
}

// Seeds is the random seed (or seeds) of ginkgo reports: the spec order.
func Seeds(rs []types.Report) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprint(r.SuiteConfig.RandomSeed))
	}
	return strings.Join(out, "/")
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

type pairs map[string]string

func (p pairs) String() string { return fmt.Sprint(map[string]string(p)) }
func (p pairs) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	p[k] = val
	return nil
}

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	reports, seconds := pairs{}, pairs{}
	var skipFiles list
	var order list
	focus := flag.String("focus", `\[sig-scheduling\]`, "the specs to report (ginkgo's focus)")
	out := flag.String("out", "", "also write the table to this file")
	flag.Func("report", "PROFILE=FILE: a ginkgo JSON report (repeat)", func(v string) error {
		if err := reports.Set(v); err != nil {
			return err
		}
		k, _, _ := strings.Cut(v, "=")
		return order.Set(k)
	})
	retries := pairs{}
	flag.Var(retries, "retry", "PROFILE=FILE: a ginkgo JSON report of a re-run of some of its specs (Retried)")
	failingOut := flag.String("failing-out", "", "write the specs that pass on stock only here, one per line")
	flag.Var(seconds, "seconds", "PROFILE=N: how long its run took")
	flag.Var(&skipFiles, "skip-list", "a skip list the run used (its reasons go into the table)")
	flag.Parse()
	re, err := regexp.Compile(*focus)
	check(err)
	var skips []SkipRule
	for _, f := range skipFiles {
		fh, err := os.Open(f)
		check(err)
		rules, err := ParseSkipList(fh)
		fh.Close()
		check(err)
		skips = append(skips, rules...)
	}
	results := map[string]map[string]Result{}
	var seeds []string
	for _, p := range order {
		raw, err := os.ReadFile(reports[p])
		check(err)
		var rs []types.Report
		check(json.Unmarshal(raw, &rs))
		results[p] = Specs(rs, re)
		seeds = append(seeds, fmt.Sprintf("%s %s", p, Seeds(rs)))
		if len(results[p]) == 0 {
			check(fmt.Errorf("%s: no spec matches %q", reports[p], *focus))
		}
		if f, ok := retries[p]; ok {
			raw, err := os.ReadFile(f)
			check(err)
			var rr []types.Report
			check(json.Unmarshal(raw, &rr))
			Retried(results[p], Specs(rr, re))
		}
	}
	rows, fails := Compare(order, results, skips)
	if *failingOut != "" {
		var b strings.Builder
		for _, r := range rows {
			if r.Verdict == "FAIL" {
				b.WriteString(r.Spec + "\n")
			}
		}
		check(os.WriteFile(*failingOut, []byte(b.String()), 0o644))
	}
	var b strings.Builder
	// The spec order (the framework randomizes every spec's place): what
	// to pass as CONFORMANCE_SEED to run them in this order again.
	fmt.Fprintf(&b, "ginkgo seed: %s\n\n", strings.Join(seeds, ", "))
	Markdown(&b, order, rows, seconds)
	fmt.Print(b.String())
	if *out != "" {
		check(os.WriteFile(*out, []byte(b.String()), 0o644))
	}
	if fails > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d spec(s) pass on the stock profile and not on hivesched's\n", fails)
		os.Exit(1)
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(2)
	}
}
