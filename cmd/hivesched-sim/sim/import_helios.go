package sim

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// SenseTime's Helios traces (github.com/S-Lab-System-Group/HeliosData, CC
// BY 4.0; Hu et al., SC'21). cluster_log.csv, one Slurm job a line:
// job_id, user, vc, gpu_num (GPUs of the whole job), cpu_num, node_num
// (nodes it ran on), state (COMPLETED, CANCELLED, FAILED, TIMEOUT,
// NODE_FAIL), submit_time, start_time, end_time ("2020-06-09 18:41:01"),
// duration (end - start, seconds), queue (start - submit, seconds).
//
// A job becomes node_num pods of gpu_num/node_num GPUs each (Helios' nodes
// have 8 GPUs; a job spread unevenly over its nodes is rounded up to the
// largest share, and counted). CPU-only jobs (gpu_num 0) are skipped. Every
// state is kept: a failed or cancelled job held its GPUs for its duration
// all the same. The trace's own queue time is not used: the simulator
// decides when each job starts.

const heliosTime = "2006-01-02 15:04:05"

// heliosVC maps a VC id; one not in vcMap is lower-cased (vcJkd to vcjkd):
// Helios' ids have capitals, VirtualCluster names may not.
func heliosVC(vcMap map[string]string, vc string) string {
	if m, ok := vcMap[vc]; ok {
		return m
	}
	return strings.ToLower(vc)
}

// ReadHelios imports a Helios cluster_log.csv.
func ReadHelios(r io.Reader, vcMap map[string]string) ([]Job, *ImportStats, error) {
	st := newStats("helios")
	t, err := newTable("helios cluster_log", r, []string{"job_id", "vc", "gpu_num", "node_num", "submit_time", "start_time", "end_time"}, nil)
	if err != nil {
		return nil, nil, err
	}
	var jobs []Job
	seen := map[string]bool{}
	for {
		ok, err := t.next()
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			break
		}
		st.Read++
		gpus, has, err := t.num("gpu_num")
		if err != nil {
			return nil, nil, err
		}
		if !has || gpus <= 0 {
			st.Skipped["CPU-only job (gpu_num 0)"]++
			continue
		}
		nodes, has, err := t.num("node_num")
		if err != nil {
			return nil, nil, err
		}
		if !has || nodes < 1 {
			st.Changed["node_num missing or 0: taken as 1 node"]++
			nodes = 1
		}
		times := make([]time.Time, 3)
		bad := false
		for i, c := range []string{"submit_time", "start_time", "end_time"} {
			if times[i], err = time.Parse(heliosTime, t.str(c)); err != nil {
				bad = true
			}
		}
		if bad || times[2].Before(times[1]) || times[1].Before(times[0]) {
			st.Skipped["never ran, or times missing or out of order"]++
			continue
		}
		id := t.str("job_id")
		if seen[id] {
			return nil, nil, fmt.Errorf("helios cluster_log line %d: job_id %q twice", t.line, id)
		}
		seen[id] = true
		per := math.Ceil(gpus / nodes)
		if per*nodes != gpus {
			st.Changed["GPUs spread unevenly over the job's nodes: each pod given the largest share"]++
		}
		jobs = append(jobs, Job{ID: id, Submit: float64(times[0].Unix()), Duration: times[2].Sub(times[1]).Seconds(),
			VC: heliosVC(vcMap, t.str("vc")), Pods: int32(nodes), Leaves: int32(per)})
	}
	st.Imported = len(jobs)
	rebase(jobs)
	return jobs, st, nil
}

// Alibaba's cluster-trace-gpu-v2023 "openb" (github.com/alibaba/clusterdata,
// for research and study use; Weng et al., ATC'23): pod lists such as
// csv/openb_pod_list_default.csv, one Kubernetes pod a line: name,
// cpu_milli, memory_mib, num_gpu (0 to 8), gpu_milli (the share of one GPU
// a GPU-sharing pod asks, in thousandths, when num_gpu is 1), gpu_spec
// (allowed GPU models, "|"-separated; empty for any), qos (LS, BE,
// Burstable, Guaranteed), pod_phase (Succeeded, Running, Pending, Failed),
// creation_time, deletion_time, scheduled_time (seconds).
//
// A pod is a job of one pod of num_gpu GPUs, in the VC named by its qos
// (rename with vcMap), submitted at creation_time and running from
// scheduled_time to deletion_time. GPU-sharing pods (gpu_milli under 1000)
// are rounded up to a whole GPU and counted; gpu_spec is ignored (counted);
// CPU-only pods and pods never scheduled are skipped; pods still Running
// when the trace ends have the trace's end as deletion_time, so their run
// is cut there (counted).

// ReadOpenB imports an openb pod list.
func ReadOpenB(r io.Reader, vcMap map[string]string) ([]Job, *ImportStats, error) {
	st := newStats("openb")
	t, err := newTable("openb pod list", r, []string{"name", "num_gpu", "gpu_milli", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time"}, nil)
	if err != nil {
		return nil, nil, err
	}
	_, hasSpec := t.col["gpu_spec"]
	var jobs []Job
	for {
		ok, err := t.next()
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			break
		}
		st.Read++
		gpus, _, err := t.num("num_gpu")
		if err != nil {
			return nil, nil, err
		}
		if gpus <= 0 {
			st.Skipped["CPU-only pod (num_gpu 0)"]++
			continue
		}
		created, ok1, err1 := t.num("creation_time")
		deleted, ok2, err2 := t.num("deletion_time")
		sched, ok3, err3 := t.num("scheduled_time")
		for _, e := range []error{err1, err2, err3} {
			if e != nil {
				return nil, nil, e
			}
		}
		if !ok3 {
			st.Skipped["never scheduled (no scheduled_time)"]++
			continue
		}
		if !ok1 || !ok2 || deleted < sched || sched < created {
			st.Skipped["times missing or out of order"]++
			continue
		}
		if milli, ok, err := t.num("gpu_milli"); err != nil {
			return nil, nil, err
		} else if ok && gpus == 1 && milli > 0 && milli < 1000 {
			st.Rounded++
		}
		if hasSpec && t.str("gpu_spec") != "" {
			st.Changed["GPU model constraint (gpu_spec) ignored: any GPU"]++
		}
		if t.str("pod_phase") == "Running" {
			st.Changed["still Running at the trace's end: run cut at its deletion_time (the trace's end)"]++
		}
		jobs = append(jobs, Job{ID: t.str("name"), Submit: created, Duration: deleted - sched, VC: mapVC(vcMap, t.str("qos")),
			Pods: 1, Leaves: int32(math.Ceil(gpus))})
	}
	st.Imported = len(jobs)
	rebase(jobs)
	return jobs, st, nil
}
