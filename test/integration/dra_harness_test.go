package integration

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"

	"github.com/hivesched/hivesched/plugins/dra/dratest"
	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/test/util"
)

// GPU claims (DRA) on a real API server. There is no kubelet and no DRA
// driver: the tests publish the ResourceSlices NVIDIA's gpu-kubelet-plugin
// would (dratest.Slice: 8 GPUs per node, two PCIe roots) and install its
// DeviceClass; the resourceclaim controller (kube-controller-manager's,
// run in the test process) creates template claims and releases the claims
// of finished pods, as in a real cluster.

// startClaimController runs Kubernetes' resourceclaim controller against
// the cluster until the test ends.
func (c *cluster) startClaimController(t *testing.T) {
	f := informers.NewSharedInformerFactory(c.kube, 0)
	ctrl, err := resourceclaim.NewController(klog.Background(), c.kube, f.Core().V1().Pods(), nil,
		f.Resource().V1().ResourceClaims(), f.Resource().V1().ResourceClaimTemplates())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f.Start(ctx.Done())
	go ctrl.Run(ctx, 4)
}

// createDRANodes creates the nodes of physicalCluster(prefix, racks,
// nodesPerRack, 0) as a node with NVIDIA's DRA driver and no device plugin
// has them (no nvidia.com/gpu in allocatable), their ResourceSlices, and
// the DeviceClass (once).
func (c *cluster) createDRANodes(t *testing.T, prefix string, racks, nodesPerRack int) {
	if _, err := c.kube.ResourceV1().DeviceClasses().Create(t.Context(), dratest.DeviceClass(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	for r := 0; r < racks; r++ {
		for n := 0; n < nodesPerRack; n++ {
			name := fmt.Sprintf("%s-r%d-n%d", prefix, r, n)
			c.createNode(t, name, "nvidia.com/gpu", 0, true)
			c.createSlice(t, dratest.Slice(name, "Tesla V100-SXM2-32GB", 8))
		}
	}
}

func (c *cluster) createSlice(t *testing.T, s *resourceapi.ResourceSlice) {
	_, err := c.kube.ResourceV1().ResourceSlices().Create(t.Context(), s, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.kube.ResourceV1().ResourceSlices().Delete(context.Background(), s.Name, metav1.DeleteOptions{})
	})
}

// claimGangPods is a native-form gang whose pods ask for their GPUs with a
// ResourceClaimTemplate of gpus GPUs each (created here), not as
// nvidia.com/gpu.
func (c *cluster) claimGangPods(t *testing.T, ns, group, vc string, priority, n int, gpus int64, scheduler string) []*v1.Pod {
	tmpl := dratest.Template(ns, group+"-gpus", gpus)
	_, err := c.kube.ResourceV1().ResourceClaimTemplates(ns).Create(t.Context(), tmpl, metav1.CreateOptions{})
	require.NoError(t, err)
	pods := util.GangPods(ns, group, vc, priority, n, gpus, scheduler)
	for _, p := range pods {
		r := &p.Spec.Containers[0].Resources
		delete(r.Requests, "nvidia.com/gpu")
		delete(r.Limits, "nvidia.com/gpu")
		dratest.UseClaim(p, tmpl.Name, true)
	}
	return pods
}

// podClaim is the (first) ResourceClaim of a pod, as the API has it now.
func (c *cluster) podClaim(t *testing.T, p *v1.Pod) *resourceapi.ResourceClaim {
	var claim *resourceapi.ResourceClaim
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := c.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		name := ""
		for _, pc := range got.Spec.ResourceClaims {
			switch {
			case pc.ResourceClaimName != nil:
				name = *pc.ResourceClaimName
			default:
				for _, st := range got.Status.ResourceClaimStatuses {
					if st.Name == pc.Name && st.ResourceClaimName != nil {
						name = *st.ResourceClaimName
					}
				}
			}
			break
		}
		if name == "" {
			return false, nil
		}
		claim, err = c.kube.ResourceV1().ResourceClaims(p.Namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	})
	require.NoError(t, err, "pod %s has no claim", p.Name)
	return claim
}

// claimDevices lists a claim's allocated devices as driver/pool/device.
func claimDevices(c *resourceapi.ResourceClaim) []string {
	if c.Status.Allocation == nil {
		return nil
	}
	var out []string
	for _, r := range c.Status.Allocation.Devices.Results {
		out = append(out, r.Driver+"/"+r.Pool+"/"+r.Device)
	}
	sort.Strings(out)
	return out
}

// requireClaimsMatchCells checks each bound pod's claim: allocated with
// exactly the devices of its hivesched.io/leaf-cell-indices on its node,
// reserved for the pod, its status written by hivesched.
func (c *cluster) requireClaimsMatchCells(t *testing.T, pods []*v1.Pod) {
	for _, p := range pods {
		got := c.getPod(t, p)
		require.NotEmpty(t, got.Spec.NodeName, p.Name)
		var want []string
		for _, i := range strings.Split(got.Annotations[hivesched.AnnotationLeafCellIndices], ",") {
			want = append(want, fmt.Sprintf("%s/%s/gpu-%s", dratest.Driver, got.Spec.NodeName, i))
		}
		sort.Strings(want)
		claim := c.podClaim(t, p)
		require.Equal(t, want, claimDevices(claim), "pod %s: its claim's devices are its cells", p.Name)
		require.Len(t, claim.Status.ReservedFor, 1)
		require.Equal(t, got.UID, claim.Status.ReservedFor[0].UID)
		require.Contains(t, claim.Finalizers, resourceapi.Finalizer)
		require.Equal(t, "hivesched", statusManager(claim), "pod %s: claim %s's allocation written by hivesched", p.Name, claim.Name)
		sel := claim.Status.Allocation.NodeSelector
		require.NotNil(t, sel)
		require.Equal(t, []string{got.Spec.NodeName}, sel.NodeSelectorTerms[0].MatchFields[0].Values)
	}
}

// statusManager is the field manager of a claim's status.allocation.
func statusManager(c *resourceapi.ResourceClaim) string {
	for _, m := range c.ManagedFields {
		if m.Subresource == "status" && m.FieldsV1 != nil && strings.Contains(string(m.FieldsV1.Raw), `"f:allocation"`) {
			return m.Manager
		}
	}
	return ""
}

// requireNoDeviceTwice: no device is in two allocated claims.
func (c *cluster) requireNoDeviceTwice(t *testing.T) {
	claims, err := c.kube.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	holder := map[string]string{}
	for _, cl := range claims.Items {
		for _, d := range claimDevices(&cl) {
			require.Empty(t, holder[d], "device %s is in claims %s and %s/%s", d, holder[d], cl.Namespace, cl.Name)
			holder[d] = cl.Namespace + "/" + cl.Name
		}
	}
}

// withProfile adds a second profile to the scheduler process: the default
// plugins (DynamicResources unwrapped) under schedulerName.
func withProfile(name string) profileOption {
	return func(profile map[string]any) {
		profile[extraProfilesKey] = append(slices.Clone(asList(profile[extraProfilesKey])), map[string]any{"schedulerName": name})
	}
}

const extraProfilesKey = "__extraProfiles"

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return nil
}

// startDefaultScheduler runs kube-scheduler's default profile (schedulerName
// default-scheduler, DynamicResources as Kubernetes ships it) beside
// hivesched, as a cluster runs them: a scheduler of its own (scheduler
// profiles of one process must share their QueueSort plugin, and each
// HiveSched builds a cell core of its own). It allocates the claims of its
// pods from the same devices, with no knowledge of hivesched's.
func (c *cluster) startDefaultScheduler(t *testing.T) {
	opts := schedulerOptions(t, c.kubeconfig, []any{map[string]any{"schedulerName": v1.DefaultSchedulerName}}, "default-scheduler.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	cc, sched, err := app.Setup(ctx, opts)
	if err != nil {
		cancel()
		require.NoError(t, err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	// app.Run without its endpoints and configz (the hivesched scheduler
	// of the test registers those).
	cc.EventBroadcaster.StartRecordingToSink(ctx.Done())
	cc.InformerFactory.Start(ctx.Done())
	if cc.DynInformerFactory != nil {
		cc.DynInformerFactory.Start(ctx.Done())
	}
	cc.InformerFactory.WaitForCacheSync(ctx.Done())
	require.NoError(t, sched.WaitForHandlersSync(ctx))
	go func() {
		defer close(done)
		defer cc.EventBroadcaster.Shutdown()
		sched.Run(ctx)
	}()
}

// draPod is a pod of another scheduler with a claim of gpus GPUs (created
// here).
func (c *cluster) draPod(t *testing.T, ns, name string, gpus int64, scheduler string) *v1.Pod {
	claim := dratest.Claim(ns, name+"-gpus", gpus)
	_, err := c.kube.ResourceV1().ResourceClaims(ns).Create(t.Context(), claim, metav1.CreateOptions{})
	require.NoError(t, err)
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.PodSpec{SchedulerName: scheduler, Tolerations: []v1.Toleration{{Operator: v1.TolerationOpExists}},
			Containers: []v1.Container{{Name: "main", Image: "busybox"}}},
	}
	dratest.UseClaim(p, claim.Name, false)
	return p
}

// draPodTolerating is a default-scheduler pod whose claim tolerates the
// fence of manifests/dra/fence.yaml.
func (c *cluster) draPodTolerating(t *testing.T, ns, name string, gpus int64) *v1.Pod {
	claim := dratest.Claim(ns, name+"-gpus", gpus)
	claim.Spec.Devices.Requests[0].Exactly.Tolerations = []resourceapi.DeviceToleration{{Key: "hivesched.io/gpus", Operator: resourceapi.DeviceTolerationOpExists}}
	_, err := c.kube.ResourceV1().ResourceClaims(ns).Create(t.Context(), claim, metav1.CreateOptions{})
	require.NoError(t, err)
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "busybox"}}},
	}
	dratest.UseClaim(p, claim.Name, false)
	return p
}

// allocateAs writes a claim's allocation and reservation as another
// allocator would (the test's admin identity, not hivesched): devices of
// node, reserved for pod.
func (c *cluster) allocateAs(t *testing.T, ns, name, node string, devices []string, pod *v1.Pod) *resourceapi.ResourceClaim {
	claim, err := c.kube.ResourceV1().ResourceClaims(ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	claim.Finalizers = append(claim.Finalizers, resourceapi.Finalizer)
	claim, err = c.kube.ResourceV1().ResourceClaims(ns).Update(t.Context(), claim, metav1.UpdateOptions{})
	require.NoError(t, err)
	alloc := &resourceapi.AllocationResult{NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node}}}}}}}
	for _, d := range devices {
		alloc.Devices.Results = append(alloc.Devices.Results, resourceapi.DeviceRequestAllocationResult{Request: "gpus", Driver: dratest.Driver, Pool: node, Device: d})
	}
	claim.Status.Allocation = alloc
	claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	claim, err = c.kube.ResourceV1().ResourceClaims(ns).UpdateStatus(t.Context(), claim, metav1.UpdateOptions{FieldManager: "someone-else"})
	require.NoError(t, err)
	return claim
}

// createClass creates a DeviceClass of every device of driver (CEL).
func (c *cluster) createClass(t *testing.T, name, driver string) {
	_, err := c.kube.ResourceV1().DeviceClasses().Create(t.Context(), &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == '%s'", driver)}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// nicSlice is a node's slice of a second driver with two NICs.
func nicSlice(node string) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-nic"},
		Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com", NodeName: &node,
			Pool:    resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{Name: "nic-0"}, {Name: "nic-1"}}},
	}
}

// allocationWatch counts, per claim, how often its status.allocation was
// set (from none), and who set it last, from a watch opened before the
// claims exist.
type allocationWatch struct {
	mu      sync.Mutex
	sets    map[string]int
	manager map[string]string
}

func (c *cluster) watchAllocations(t *testing.T) *allocationWatch {
	w := &allocationWatch{sets: map[string]int{}, manager: map[string]string{}}
	watcher, err := c.kube.ResourceV1().ResourceClaims(metav1.NamespaceAll).Watch(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	t.Cleanup(watcher.Stop)
	allocated := map[string]bool{}
	go func() {
		for ev := range watcher.ResultChan() {
			cl, ok := ev.Object.(*resourceapi.ResourceClaim)
			if !ok {
				continue
			}
			key := cl.Namespace + "/" + cl.Name
			w.mu.Lock()
			now := cl.Status.Allocation != nil
			if now && !allocated[key] {
				w.sets[key]++
				w.manager[key] = statusManager(cl)
			}
			allocated[key] = now
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *allocationWatch) get(key string) (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sets[key], w.manager[key]
}
