package sim

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func traceFile(name string) string {
	return filepath.Join("..", "..", "..", "manifests", "sim", "traces", name)
}

// The hand-written Helios rows (cluster_log.csv's columns, README of
// HeliosData): every state is kept, CPU jobs and a job that never started
// are skipped, node_num pods of gpu_num/node_num GPUs, an uneven split
// rounded up and counted; an unmapped VC id is lower-cased.
func TestReadHeliosSample(t *testing.T) {
	jobs, st, err := Import("helios", []string{traceFile("helios-sample.csv")}, map[string]string{"vcTrn": "vc-train", "vcDev": "vc-dev"})
	require.NoError(t, err)
	require.Equal(t, []Job{
		{ID: "1000001", Submit: 0, Duration: 7200, VC: "vc-train", Pods: 1, Leaves: 8},
		{ID: "1000002", Submit: 30, Duration: 240, VC: "vc-dev", Pods: 1, Leaves: 1},
		{ID: "1000004", Submit: 600, Duration: 8 * 3600, VC: "vc-train", Pods: 4, Leaves: 8},
		{ID: "1000005", Submit: 1200, Duration: 4 * 3600, VC: "vcres", Pods: 2, Leaves: 6},
		{ID: "1000006", Submit: 1800, Duration: 1800, VC: "vc-dev", Pods: 2, Leaves: 2},
		{ID: "1000008", Submit: 3000, Duration: 86400, VC: "vc-dev", Pods: 1, Leaves: 1},
	}, jobs)
	require.Equal(t, 8, st.Read)
	require.Equal(t, 6, st.Imported)
	require.Equal(t, map[string]int{"CPU-only job (gpu_num 0)": 1, "never ran, or times missing or out of order": 1}, st.Skipped)
	require.Equal(t, map[string]int{"GPUs spread unevenly over the job's nodes: each pod given the largest share": 1}, st.Changed)
	_, _, err = ReadHelios(strings.NewReader("job_id,vc,gpu_num\n1,a,1\n"), nil)
	require.ErrorContains(t, err, `no column "node_num"`)
}

// PAI's job and task tables as released (no header line): a job is a gang
// of its GPU tasks' instances; half a GPU is rounded up to one and
// counted; a parameter-server task without GPUs is no pod; a job whose
// tasks ask 4 and 1 GPUs per instance is shaped 3x4; unfinished and
// CPU-only jobs are skipped.
func TestReadAlibaba2020Sample(t *testing.T) {
	jobs, st, err := Import("alibaba2020", []string{traceFile("alibaba2020-job-sample.csv"), traceFile("alibaba2020-task-sample.csv")},
		map[string]string{"T4": "vc-dev"})
	require.NoError(t, err)
	require.Equal(t, []Job{
		{ID: "7a11c0de5eed000000000000", Submit: 0, Duration: 1300, VC: "vc-dev", Pods: 1, Leaves: 1},
		{ID: "7a11c0de5eed000000000001", Submit: 1000, Duration: 7980, VC: "V100", Pods: 1, Leaves: 1},
		{ID: "7a11c0de5eed000000000002", Submit: 2000, Duration: 47960, VC: "V100", Pods: 4, Leaves: 8},
		{ID: "7a11c0de5eed000000000005", Submit: 5000, Duration: 34980, VC: "V100", Pods: 3, Leaves: 4},
	}, jobs)
	require.Equal(t, 6, st.Read)
	require.Equal(t, 1, st.Rounded)
	require.Equal(t, map[string]int{"unfinished (status Running or Waiting)": 1, "CPU-only job (no task with plan_gpu > 0)": 1}, st.Skipped)
	require.Equal(t, map[string]int{"GPU tasks asking different GPUs per instance: every pod given the largest": 1}, st.Changed)
	// A hand-made table with its header line reads the same.
	hdr := strings.Join(aliJobHeader, ",") + "\nj,i,u,Terminated,10,20\n"
	tasks := strings.Join(aliTaskHeader, ",") + "\nj,worker,2,Terminated,11,19,100,1,150,P100\n"
	jobs, st, err = ReadAlibaba2020(strings.NewReader(hdr), strings.NewReader(tasks), nil)
	require.NoError(t, err)
	require.Equal(t, []Job{{ID: "j", Submit: 0, Duration: 8, VC: "P100", Pods: 2, Leaves: 2}}, jobs)
	require.Equal(t, 2, st.Rounded, "both instances of 1.5 GPUs")
}

// openb's pod list (csv/openb_pod_list_default.csv's columns): one pod per
// job in the VC of its QoS class; GPU-sharing pods rounded up and counted;
// CPU-only and never-scheduled pods skipped; a pod still running at the
// trace's end is cut there (counted); gpu_spec ignored (counted).
func TestReadOpenBSample(t *testing.T) {
	jobs, st, err := Import("openb", []string{traceFile("openb-sample.csv")}, map[string]string{"LS": "vc-dev"})
	require.NoError(t, err)
	require.Equal(t, []Job{
		{ID: "openb-pod-9000", Submit: 0, Duration: 1000000, VC: "Burstable", Pods: 1, Leaves: 8},
		{ID: "openb-pod-9001", Submit: 200000, Duration: 12902960 - 9600000, VC: "BE", Pods: 1, Leaves: 1},
		{ID: "openb-pod-9002", Submit: 500000, Duration: 3540, VC: "vc-dev", Pods: 1, Leaves: 1},
		{ID: "openb-pod-9005", Submit: 602000, Duration: 87900, VC: "vc-dev", Pods: 1, Leaves: 2},
		{ID: "openb-pod-9006", Submit: 603000, Duration: 490, VC: "vc-dev", Pods: 1, Leaves: 1},
		{ID: "openb-pod-9007", Submit: 604000, Duration: 195000, VC: "Guaranteed", Pods: 1, Leaves: 4},
	}, jobs)
	require.Equal(t, 8, st.Read)
	require.Equal(t, 2, st.Rounded, "gpu_milli 250 and 500")
	require.Equal(t, map[string]int{"CPU-only pod (num_gpu 0)": 1, "never scheduled (no scheduled_time)": 1}, st.Skipped)
	require.Equal(t, map[string]int{"GPU model constraint (gpu_spec) ignored: any GPU": 1,
		"still Running at the trace's end: run cut at its deletion_time (the trace's end)": 1}, st.Changed)
	require.Contains(t, st.Notes(), "rounded up 2 pods: GPU-sharing (fractional GPU) requests rounded up to whole GPUs")
}

func TestImportErrors(t *testing.T) {
	_, _, err := Import("nope", []string{traceFile("openb-sample.csv")}, nil)
	require.ErrorContains(t, err, `unknown trace format "nope"`)
	_, _, err = Import("alibaba2020", []string{traceFile("alibaba2020-job-sample.csv")}, nil)
	require.ErrorContains(t, err, "reads 2 file(s)")
	_, _, err = ReadOpenB(strings.NewReader("name,num_gpu,gpu_milli,qos,pod_phase,creation_time,deletion_time,scheduled_time\np,x,1,LS,Running,1,2,1\n"), nil)
	require.ErrorContains(t, err, `line 2: num_gpu "x" is not a number`)
}

// Every sample runs end to end on the sample cluster with its VCs mapped:
// what CI's make sim-trace does.
func TestSamplesRun(t *testing.T) {
	root := filepath.Join("..", "..", "..", "manifests", "sim")
	cl, err := LoadCluster(filepath.Join(root, "scheduler-config.yaml"))
	require.NoError(t, err)
	vcs, err := LoadVirtualClusters(filepath.Join(root, "virtualclusters.yaml"))
	require.NoError(t, err)
	for _, c := range []struct {
		format string
		files  []string
		vcMap  map[string]string
	}{
		{"helios", []string{"helios-sample.csv"}, map[string]string{"vcTrn": "vc-train", "vcDev": "vc-dev", "vcRes": "vc-research"}},
		{"alibaba2020", []string{"alibaba2020-job-sample.csv", "alibaba2020-task-sample.csv"}, map[string]string{"V100": "vc-train", "T4": "vc-dev"}},
		{"openb", []string{"openb-sample.csv"}, map[string]string{"LS": "vc-dev", "BE": "vc-research", "Burstable": "vc-train", "Guaranteed": "vc-train"}},
	} {
		var files []string
		for _, f := range c.files {
			files = append(files, traceFile(f))
		}
		jobs, _, err := Import(c.format, files, c.vcMap)
		require.NoError(t, err, c.format)
		rep, err := Run(&Input{Cluster: cl, VCs: vcs, Jobs: jobs, Policies: Policies, Tolerance: 600, SampleEvery: 600, LateAfter: 3600})
		require.NoError(t, err, c.format)
		for _, res := range rep.Results {
			for _, r := range res.Runs {
				require.True(t, r.started, "%s %s: %s never started (%s)", c.format, res.Policy, r.job.ID, r.invalid)
			}
		}
		require.Zero(t, rep.compare(rep.Results[0], "").anomalies, c.format)
	}
}
