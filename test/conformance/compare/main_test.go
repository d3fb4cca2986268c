package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/onsi/ginkgo/v2/types"
)

func spec(hier []string, leaf string, typ types.NodeType, st types.SpecState, msg string) types.SpecReport {
	return types.SpecReport{ContainerHierarchyTexts: hier, LeafNodeText: leaf, LeafNodeType: typ, State: st,
		Failure: types.Failure{Message: msg}}
}

// The report goes through JSON as the e2e binary writes it: states are
// names there, and a spec's full text is its containers' and its own.
func TestSpecsFromJSON(t *testing.T) {
	in := []types.Report{{SpecReports: types.SpecReports{
		spec([]string{"[sig-scheduling] SchedulerPreemption [Serial]"}, "validates basic preemption works [Conformance]",
			types.NodeTypeIt, types.SpecStateFailed, "Timed out\nafter 5m"),
		spec([]string{"[sig-apps] Job"}, "should run", types.NodeTypeIt, types.SpecStatePassed, ""),
		spec(nil, "", types.NodeTypeSynchronizedBeforeSuite, types.SpecStatePassed, ""),
	}}}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var back []types.Report
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	got := Specs(back, regexp.MustCompile(`\[sig-scheduling\]`))
	want := "[sig-scheduling] SchedulerPreemption [Serial] validates basic preemption works [Conformance]"
	if len(got) != 1 || got[want] != (Result{State: "failed", Why: "Timed out"}) {
		t.Fatalf("Specs = %#v, want only %q failed with its first message line", got, want)
	}
}

func TestCompareVerdicts(t *testing.T) {
	skips, err := ParseSkipList(strings.NewReader("# comment\n\nPVC spec -- no storage\n"))
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]map[string]Result{
		"stock": {
			"a passes on both":   {State: "passed"},
			"b regresses":        {State: "passed"},
			"c fails on both":    {State: "failed"},
			"d PVC spec":         {State: "skipped"},
			"e only hivesched":   {State: "failed"},
			"f missing on other": {State: "passed"},
		},
		"default": {
			"a passes on both": {State: "passed"},
			"b regresses":      {State: "failed", Why: "timed out"},
			"c fails on both":  {State: "failed"},
			"d PVC spec":       {State: "skipped"},
			"e only hivesched": {State: "passed"},
		},
	}
	rows, fails := Compare([]string{"stock", "default"}, results, skips)
	verdicts := map[string]string{}
	for _, r := range rows {
		verdicts[r.Spec] = r.Verdict
	}
	want := map[string]string{"a passes on both": "PASS", "b regresses": "FAIL", "c fails on both": "PASS",
		"d PVC spec": "PASS", "e only hivesched": "PASS", "f missing on other": "FAIL"}
	for s, v := range want {
		if verdicts[s] != v {
			t.Errorf("%s: verdict %q, want %q", s, verdicts[s], v)
		}
	}
	if fails != 2 {
		t.Errorf("fails = %d, want 2", fails)
	}
	for _, r := range rows {
		if r.Spec == "d PVC spec" && r.Results["stock"].Why != "skip list: no storage" {
			t.Errorf("skipped spec's reason = %q", r.Results["stock"].Why)
		}
	}
	// One profile alone: no verdict, nothing fails.
	if rows, fails := Compare([]string{"default"}, map[string]map[string]Result{"default": results["default"]}, nil); fails != 0 || rows[0].Verdict != "" {
		t.Errorf("one profile: fails %d, verdict %q", fails, rows[0].Verdict)
	}
}

func TestParseSkipListRejectsLinesWithoutReason(t *testing.T) {
	if _, err := ParseSkipList(strings.NewReader("Foo\n")); err == nil {
		t.Fatal("a line without ' -- why' was accepted")
	}
}

// TestRetried: a spec that passes when re-run counts as passed, with a note;
// one that fails again, or was not re-run, keeps its failure.
func TestRetried(t *testing.T) {
	results := map[string]Result{
		"flaky":  {State: "failed", Why: "timed out"},
		"broken": {State: "failed", Why: "nope"},
		"fine":   {State: "passed"},
	}
	Retried(results, map[string]Result{"flaky": {State: "passed"}, "broken": {State: "failed", Why: "nope again"}})
	if r := results["flaky"]; r.State != "passed" || !strings.Contains(r.Why, "re-run") || !strings.Contains(r.Why, "timed out") {
		t.Errorf("flaky: %+v", r)
	}
	if r := results["broken"]; r.State != "failed" || r.Why != "nope" {
		t.Errorf("broken: %+v", r)
	}
	if r := results["fine"]; r.State != "passed" {
		t.Errorf("fine: %+v", r)
	}
}
