package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Microsoft's Philly trace (github.com/msr-fiddle/philly-traces; the data
// under CC BY 4.0, its analysis code MIT; Jeon et al., ATC'19):
// cluster_job_log is a JSON list of jobs, each with its virtual
// cluster, submission time and attempts; an attempt lists the machines it
// ran on and the GPUs it used on each. The importer reads that format: a
// job's shape is its first attempt's (one pod per machine, the most GPUs
// any machine gave it per pod), its duration from its first attempt's start
// to its last attempt's end. Jobs that never started are skipped.

type phillyJob struct {
	Status    string          `json:"status"`
	VC        string          `json:"vc"`
	JobID     string          `json:"jobid"`
	Submitted string          `json:"submitted_time"`
	Attempts  []phillyAttempt `json:"attempts"`
}

type phillyAttempt struct {
	Start  string         `json:"start_time"`
	End    string         `json:"end_time"`
	Detail []phillyDetail `json:"detail"`
}

type phillyDetail struct {
	IP   string   `json:"ip"`
	GPUs []string `json:"gpus"`
}

const phillyTime = "2006-01-02 15:04:05"

// ReadPhilly imports a Philly cluster_job_log. vcMap renames Philly's VC
// ids (which are hashes) to VirtualCluster names; a VC not in it keeps its
// id. Times become seconds after the first submission.
func ReadPhilly(r io.Reader, vcMap map[string]string, priority int32) ([]Job, *ImportStats, error) {
	var raw []phillyJob
	if err := json.NewDecoder(r).Decode(&raw); err != nil {
		return nil, nil, fmt.Errorf("philly trace: %w", err)
	}
	st := newStats("philly")
	st.Read = len(raw)
	var jobs []Job
	var first time.Time
	for i, pj := range raw {
		sub, err := time.Parse(phillyTime, pj.Submitted)
		if err != nil {
			return nil, nil, fmt.Errorf("philly trace job %d (%s): submitted_time %q: %w", i, pj.JobID, pj.Submitted, err)
		}
		if len(pj.Attempts) == 0 || len(pj.Attempts[0].Detail) == 0 {
			st.Skipped["no scheduling attempt (never started)"]++
			continue
		}
		start, err1 := time.Parse(phillyTime, pj.Attempts[0].Start)
		end, err2 := time.Parse(phillyTime, pj.Attempts[len(pj.Attempts)-1].End)
		if err1 != nil || err2 != nil || end.Before(start) {
			st.Skipped["still running when the trace was taken, or attempt times missing"]++
			continue
		}
		var perPod int32
		uneven := false
		for _, d := range pj.Attempts[0].Detail {
			if perPod != 0 && int32(len(d.GPUs)) != perPod {
				uneven = true
			}
			perPod = max(perPod, int32(len(d.GPUs)))
		}
		if perPod == 0 {
			st.Skipped["first attempt lists no GPUs"]++
			continue
		}
		if uneven {
			st.Changed["machines of the first attempt gave different GPU counts: each pod given the largest"]++
		}
		vc := pj.VC
		if m, ok := vcMap[vc]; ok {
			vc = m
		}
		if first.IsZero() || sub.Before(first) {
			first = sub
		}
		jobs = append(jobs, Job{ID: pj.JobID, Submit: float64(sub.Unix()), Duration: end.Sub(start).Seconds(), VC: vc, Priority: priority,
			Pods: int32(len(pj.Attempts[0].Detail)), Leaves: perPod})
	}
	for i := range jobs {
		jobs[i].Submit -= float64(first.Unix())
	}
	SortJobs(jobs)
	st.Imported = len(jobs)
	return jobs, st, nil
}
