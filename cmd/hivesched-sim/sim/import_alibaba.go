package sim

import (
	"fmt"
	"io"
	"math"
)

// Alibaba's cluster-trace-gpu-v2020 (github.com/alibaba/clusterdata, CC BY
// 4.0; Weng et al., NSDI'22): PAI's jobs, each of tasks (roles: worker,
// ps, evaluator...), each of inst_num instances on one machine each. The
// tables ship without a header line (the column names are in separate
// .header files); a hand-made file may have one.
//
//   - pai_job_table: job_name, inst_id, user, status, start_time (the job's
//     submission), end_time (seconds, shifted by a constant).
//   - pai_task_table: job_name, task_name, inst_num, status, start_time,
//     end_time, plan_cpu, plan_mem, plan_gpu (per instance, in percent of
//     a GPU: 50 is half a GPU), gpu_type.
//
// The instance table (each instance's machine and times) is not needed:
// a task row says how many instances it has and what each asks for.
//
// A job becomes one gang: every instance of its GPU tasks (plan_gpu > 0) is
// a pod; a pod's GPUs are plan_gpu/100 rounded up (GPU-sharing instances,
// under 100 or not a multiple of it, are rounded up to whole GPUs and
// counted). A job whose GPU tasks ask different GPUs per instance gets the
// largest for every pod (counted). It runs from its first GPU task's start
// to its last one's end. PAI has no tenants' VCs: a job's VC is its GPU
// tasks' gpu_type (T4, P100, V100, V100M32, MISC...), which vcMap can
// rename or merge. Jobs still Running or Waiting, CPU-only jobs and tasks
// without times are skipped (counted).

var (
	aliJobHeader  = []string{"job_name", "inst_id", "user", "status", "start_time", "end_time"}
	aliTaskHeader = []string{"job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu", "plan_mem", "plan_gpu", "gpu_type"}
)

type aliJob struct {
	submit     float64
	start, end float64
	pods       int64
	leaves     int32
	mixed      bool
	gpuType    string
	rounded    int64
	untimed    bool
	seen       bool
}

// ReadAlibaba2020 imports PAI's job and task tables.
func ReadAlibaba2020(jobTable, taskTable io.Reader, vcMap map[string]string) ([]Job, *ImportStats, error) {
	st := newStats("alibaba2020")
	jt, err := newTable("pai_job_table", jobTable, aliJobHeader, aliJobHeader)
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]*aliJob{}
	var order []string
	for {
		ok, err := jt.next()
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			break
		}
		st.Read++
		name := jt.str("job_name")
		switch jt.str("status") {
		case "Running", "Waiting":
			st.Skipped["unfinished (status Running or Waiting)"]++
			continue
		}
		sub, has, err := jt.num("start_time")
		if err != nil {
			return nil, nil, err
		}
		if !has {
			st.Skipped["no submission time"]++
			continue
		}
		if byName[name] != nil {
			return nil, nil, fmt.Errorf("pai_job_table line %d: job_name %q twice", jt.line, name)
		}
		byName[name] = &aliJob{submit: sub, start: math.Inf(1), end: math.Inf(-1)}
		order = append(order, name)
	}
	tt, err := newTable("pai_task_table", taskTable, aliTaskHeader, aliTaskHeader)
	if err != nil {
		return nil, nil, err
	}
	for {
		ok, err := tt.next()
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			break
		}
		j := byName[tt.str("job_name")]
		if j == nil {
			continue // a task of a job skipped above, or not in the job table
		}
		gpu, has, err := tt.num("plan_gpu")
		if err != nil {
			return nil, nil, err
		}
		if !has || gpu <= 0 {
			continue // a CPU task (a parameter server...): not a GPU pod
		}
		inst, has, err := tt.num("inst_num")
		if err != nil {
			return nil, nil, err
		}
		if !has || inst < 1 {
			inst = 1
		}
		start, ok1, err1 := tt.num("start_time")
		end, ok2, err2 := tt.num("end_time")
		if err1 != nil || err2 != nil {
			return nil, nil, fmt.Errorf("pai_task_table line %d: %v %v", tt.line, err1, err2)
		}
		if !ok1 || !ok2 || end < start || start <= 0 {
			j.untimed = true
			continue
		}
		leaves := int32(math.Ceil(gpu / 100))
		if math.Mod(gpu, 100) != 0 {
			j.rounded += int64(inst)
		}
		if j.seen && leaves != j.leaves {
			j.mixed = true
		}
		if !j.seen {
			j.gpuType = tt.str("gpu_type")
			if j.gpuType == "" {
				j.gpuType = "untyped"
			}
		}
		j.seen = true
		j.leaves = max(j.leaves, leaves)
		j.pods += int64(inst)
		j.start, j.end = min(j.start, start), max(j.end, end)
	}
	var jobs []Job
	for _, name := range order {
		j := byName[name]
		switch {
		case !j.seen && j.untimed:
			st.Skipped["GPU tasks without start or end times"]++
			continue
		case !j.seen:
			st.Skipped["CPU-only job (no task with plan_gpu > 0)"]++
			continue
		case j.untimed:
			st.Changed["some GPU tasks without times: the job shaped from the others"]++
		}
		if j.mixed {
			st.Changed["GPU tasks asking different GPUs per instance: every pod given the largest"]++
		}
		st.Rounded += int(j.rounded)
		jobs = append(jobs, Job{ID: name, Submit: j.submit, Duration: j.end - j.start, VC: mapVC(vcMap, j.gpuType),
			Pods: int32(j.pods), Leaves: j.leaves})
	}
	st.Imported = len(jobs)
	rebase(jobs)
	return jobs, st, nil
}
