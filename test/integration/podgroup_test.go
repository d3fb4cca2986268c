package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgversioned "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	"sigs.k8s.io/yaml"

	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/hivesched"
)

// installPodGroupCRD installs scheduler-plugins' PodGroup CRD (shipped in
// its module) and returns a PodGroup client.
func (c *cluster) installPodGroupCRD(t *testing.T) pgversioned.Interface {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/scheduler-plugins").Output()
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "manifests", "coscheduling", "crd.yaml"))
	require.NoError(t, err)
	var crd apiextensionsv1.CustomResourceDefinition
	require.NoError(t, yaml.Unmarshal(raw, &crd))
	_, err = apiextensionsclient.NewForConfigOrDie(c.cfg).ApiextensionsV1().CustomResourceDefinitions().Create(t.Context(), &crd, metav1.CreateOptions{})
	require.NoError(t, err)
	jc := rest.CopyConfig(c.cfg)
	jc.ContentType = "application/json"
	pg := pgversioned.NewForConfigOrDie(jc)
	require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := pg.SchedulingV1alpha1().PodGroups("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	}))
	return pg
}

func podGroupPods(ns, group string, n int, gpus int64, podLabels map[string]string) []*v1.Pod {
	pods := gangPods(ns, group, "unused", 0, n, gpus)
	for _, p := range pods {
		p.Labels = map[string]string{pgv1alpha1.PodGroupLabel: group}
		for k, v := range podLabels {
			p.Labels[k] = v
		}
		p.Annotations = nil
	}
	return pods
}

// TestPodGroupInterop (issue 10): pods with scheduler-plugins' label
// scheduling.x-k8s.io/pod-group form one affinity group of the PodGroup's
// minMember pods; the VC comes from the PodGroup's hivesched.io/virtual-cluster
// label, else the pod's. Pods created before their PodGroup wait for it.
func TestPodGroupInterop(t *testing.T) {
	c := startCluster(t)
	pgc := c.installPodGroupCRD(t)
	c.createNodes(t, "pg", 1, 2, 0)
	c.createNamespace(t, "pg")
	c.createVC(t, "pg-vc", []string{"pg"}, "V100-NODE", 2)
	c.startScheduler(t, physicalCluster("pg", 1, 2, 0))
	pgs := pgc.SchedulingV1alpha1().PodGroups("pg")
	createPG := func(name string, min int32, labels map[string]string) {
		_, err := pgs.Create(t.Context(), &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: pgv1alpha1.PodGroupSpec{MinMember: min}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	t.Run("VC on the PodGroup", func(t *testing.T) {
		createPG("spark", 3, map[string]string{hivesched.LabelVirtualCluster: "pg-vc"})
		pods := podGroupPods("pg", "spark", 3, 4, nil)
		c.createPods(t, pods[:2])
		c.requireUnbound(t, pods[:2], 2*time.Second) // a gang: 2 of minMember 3
		c.createPods(t, pods[2:])
		c.waitBound(t, pods, 30*time.Second)
		for _, p := range pods {
			rec := c.getPod(t, p).Annotations[hivesched.AnnotationPlacement]
			require.Contains(t, rec, `"group":"pg/spark"`)
			require.Contains(t, rec, `"virtualCluster":"pg-vc"`)
		}
		ag := c.waitAG(t, "pg", "spark", phaseIs(hv1.AffinityGroupRunning))
		require.Equal(t, hv1.ManagedByHivesched, ag.Labels[hv1.LabelManagedBy])
		require.Equal(t, []hv1.AffinityGroupMember{{PodNumber: 3, LeafCellNumber: 4}}, ag.Spec.Members)
		require.Equal(t, "3/3", ag.Status.MembersSummary)
		c.deletePods(t, pods)
		c.waitGone(t, pods, 20*time.Second)
	})

	t.Run("VC on the pods; pods before their PodGroup", func(t *testing.T) {
		pods := podGroupPods("pg", "kf", 2, 8, map[string]string{hivesched.LabelVirtualCluster: "pg-vc"})
		c.createPods(t, pods)
		c.waitEvent(t, pods[0], `names PodGroup "kf"`, 20*time.Second)
		c.requireUnbound(t, pods, time.Second)
		createPG("kf", 2, nil)
		c.waitBound(t, pods, 30*time.Second)
		c.waitAG(t, "pg", "kf", phaseIs(hv1.AffinityGroupRunning))
		c.deletePods(t, pods)
	})

	t.Run("no VC anywhere: refused, saying where to put it", func(t *testing.T) {
		createPG("nov", 1, nil)
		pods := podGroupPods("pg", "nov", 1, 1, nil)
		c.createPods(t, pods)
		c.waitEvent(t, pods[0], "PodGroup pg/nov names no virtual cluster", 20*time.Second)
		c.deletePods(t, pods)
	})
}

// TestPodGroupCRDAfterStart (issue 31): scheduler-plugins' PodGroup CRD
// installed after the scheduler started (an operator installed later) is
// picked up without a restart; a GPU pod that names a PodGroup meanwhile is
// told that the CRD is missing.
func TestPodGroupCRDAfterStart(t *testing.T) {
	c := startCluster(t)
	c.createNodes(t, "late", 1, 1, 0)
	c.createNamespace(t, "late")
	c.createVC(t, "late-vc", []string{"late"}, "V100-NODE", 1)
	c.startScheduler(t, physicalCluster("late", 1, 1, 0))
	pods := podGroupPods("late", "kf", 2, 4, map[string]string{hivesched.LabelVirtualCluster: "late-vc"})
	c.createPods(t, pods)
	c.waitEvent(t, pods[0], "PodGroups (scheduling.x-k8s.io/v1alpha1) are not served", 20*time.Second)
	c.requireUnbound(t, pods, time.Second)
	pgc := c.installPodGroupCRD(t)
	_, err := pgc.SchedulingV1alpha1().PodGroups("late").Create(t.Context(), &pgv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "kf"},
		Spec: pgv1alpha1.PodGroupSpec{MinMember: 2}}, metav1.CreateOptions{})
	require.NoError(t, err)
	c.waitBound(t, pods, 60*time.Second)
	c.waitAG(t, "late", "kf", phaseIs(hv1.AffinityGroupRunning))
}
