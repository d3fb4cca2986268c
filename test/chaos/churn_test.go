package chaos

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/test/util"
)

// labelChaos marks the driver's pods: the triggers watch only them, and the
// run deletes them when it ends.
const labelChaos = "hivesched.io/chaos"

// labelGang and annotationMembers carry the driver's own bookkeeping on
// every pod it creates, whatever form the gang is written in (a Workload
// API pod's gang is its spec.schedulingGroup, with no hivesched label).
const (
	labelGang         = "chaos.hivesched.io/gang"
	annotationMembers = "chaos.hivesched.io/members"
)

// shape is one kind of gang the churn submits: n pods of gpus leaf cells in
// a VC, on one leaf cell type, optionally on the VC's pinned cell.
type shape struct {
	vc, ns, leaf, pinned string
	n                    int
	gpus                 int64
}

// The sample VCs (manifests/samples/virtualclusters.yaml): vc-vision holds
// rack-a (32 V100) and the pinned node gpu-b3; vc-speech three V100 nodes and
// one T4 node; t4-1 belongs to no VC, so opportunistic T4 gangs have a place
// of their own. The shapes range from one GPU to a whole rack so that packing,
// fragmentation across nodes and multi-node gangs all occur, and every one
// fits its VC when that VC is empty.
var guaranteedShapes = []shape{
	{"vc-vision", "vision", "V100", "", 1, 1},
	{"vc-vision", "vision", "V100", "", 2, 2},
	{"vc-vision", "vision", "V100", "", 1, 4},
	{"vc-vision", "vision", "V100", "", 2, 4},
	{"vc-vision", "vision", "V100", "", 1, 8},
	{"vc-vision", "vision", "V100", "", 2, 8},
	{"vc-vision", "vision", "V100", "", 4, 8},
	{"vc-vision", "vision", "V100", "pinned-b3", 1, 4},
	{"vc-vision", "vision", "V100", "pinned-b3", 1, 8},
	{"vc-speech", "speech", "V100", "", 1, 1},
	{"vc-speech", "speech", "V100", "", 1, 2},
	{"vc-speech", "speech", "V100", "", 2, 4},
	{"vc-speech", "speech", "V100", "", 1, 8},
	{"vc-speech", "speech", "V100", "", 2, 8},
	{"vc-speech", "speech", "V100", "", 3, 8},
	{"vc-speech", "speech", "T4", "", 1, 1},
	{"vc-speech", "speech", "T4", "", 2, 2},
	{"vc-speech", "speech", "T4", "", 1, 4},
}

// Opportunistic gangs (priority -1) run on idle cells anywhere, so they land
// on other VCs' cells and are preempted when those VCs claim them.
var opportunisticShapes = []shape{
	{"vc-vision", "vision", "V100", "", 1, 2},
	{"vc-vision", "vision", "V100", "", 1, 8},
	{"vc-vision", "vision", "V100", "", 2, 8},
	{"vc-speech", "speech", "V100", "", 1, 4},
	{"vc-speech", "speech", "V100", "", 2, 8},
	{"vc-speech", "speech", "T4", "", 1, 4},
	{"vc-speech", "speech", "T4", "", 2, 4},
}

// gang is one gang the driver submitted.
type gang struct {
	shape
	name     string
	priority int
	lazy     bool
	// workload: written as a Workload API PodGroup (gang policy, the VC
	// and hivesched's annotations on the PodGroup) and pods that name it.
	workload bool
	// elastic: a native gang with hivesched.io/max-members (n+2); a
	// Workload API gang takes extras beyond its minCount as it is.
	elastic bool
	created time.Time
	// extras: the extra pods the driver added (docs/elastic.md), each a
	// one-pod group of its own for the checks (its own labelGang).
	extras []string
}

// maxExtras bounds the extra pods the driver adds to one gang.
const maxExtras = 2

func (g *gang) key() string { return g.ns + "/" + g.name }

// spec is the group as the scheduler's core sees it (podspec.go's native
// form: group name "<namespace>/<affinity-group>").
func (g *gang) spec() cellcore.AffinityGroupSpec {
	return cellcore.AffinityGroupSpec{
		Name: g.key(), VirtualCluster: g.vc, Priority: int32(g.priority), LeafCellType: g.leaf,
		PinnedCellID: g.pinned, LazyPreemptionEnable: g.lazy,
		Members: []cellcore.AffinityGroupMember{{PodNumber: int32(g.n), LeafCellNumber: int32(g.gpus)}},
	}
}

// annotations are the gang's hivesched annotations beyond the VC and shape:
// on each pod in the native form, on the PodGroup in the Workload API form.
func (g *gang) annotations() map[string]string {
	a := map[string]string{hivesched.AnnotationLeafCellType: g.leaf, hivesched.AnnotationPriority: fmt.Sprint(g.priority)}
	if g.pinned != "" {
		a[hivesched.AnnotationPinnedCell] = g.pinned
	}
	if g.lazy {
		a[hivesched.AnnotationLazyPreemption] = "true"
	}
	return a
}

func (g *gang) pods() []*v1.Pod {
	ps := util.GangPods(g.ns, g.name, g.vc, g.priority, g.n, g.gpus, "hivesched")
	for _, p := range ps {
		g.inForm(p)
		p.Labels[labelGang] = g.name
		p.Annotations[annotationMembers] = fmt.Sprint(g.n)
	}
	return ps
}

// inForm writes the gang's form onto p, one of util.GangPods' pods of the
// gang (a member or an extra): a Workload API pod names its pod group; a
// native one carries the gang's annotations and shape (its minimum), and
// max-members if it is elastic. The driver's own label marks it.
func (g *gang) inForm(p *v1.Pod) {
	if g.workload {
		p.Labels = map[string]string{}
		p.Annotations = map[string]string{}
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: &g.name}
	} else {
		for k, v := range g.annotations() {
			p.Annotations[k] = v
		}
		p.Annotations[hivesched.AnnotationGroupMembers] = fmt.Sprintf("%dx%d", g.n, g.gpus)
		if g.elastic {
			p.Annotations[hivesched.AnnotationMaxMembers] = fmt.Sprint(g.n + maxExtras)
		}
	}
	p.Labels[labelChaos] = "true"
}

// podGroup is the gang's Workload API PodGroup.
func (g *gang) podGroup() *schedv1beta1.PodGroup {
	return &schedv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: g.name,
			Labels:      map[string]string{hivesched.LabelVirtualCluster: g.vc, labelChaos: "true"},
			Annotations: g.annotations()},
		Spec: schedv1beta1.PodGroupSpec{SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: int32(g.n)}}},
	}
}

// churn submits and deletes gangs without pause until stopped; pause and
// resume bracket the quiet checkpoints.
type churn struct {
	h   *harness
	rng *rand.Rand // its own stream: the kill loop's draws do not shift it

	// mu is held for each action, and by pause until resume.
	mu        sync.Mutex
	seq       int
	live      map[string]*gang // submitted, not deleted by the driver
	undeleted [][2]string      // namespace, name: deletions to retry
	// undeletedPodGroups: PodGroups of deleted Workload API gangs, deleted
	// once their pods are (namespace, name).
	undeletedPodGroups [][2]string

	stats struct {
		sync.Mutex
		submitted, deleted, preempted, podsCreated, apiErrors, workloadGangs int
		extrasCreated, extrasDeleted                                         int
	}
}

func newChurn(h *harness, seed int64) *churn {
	return &churn{h: h, rng: rand.New(rand.NewSource(seed)), live: map[string]*gang{}}
}

func (c *churn) pause()  { c.mu.Lock() }
func (c *churn) resume() { c.mu.Unlock() }

// Between minLive and maxLive gangs are kept: enough that the VCs are
// oversubscribed (preemption, waiting gangs), few enough that two cores
// keep up.
const (
	minLive = 5
	maxLive = 14
)

// run acts every 150-500 ms until ctx ends.
func (c *churn) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(150+c.rng.Intn(350)) * time.Millisecond):
		}
		c.mu.Lock()
		c.step(ctx)
		c.mu.Unlock()
	}
}

func (c *churn) step(ctx context.Context) {
	c.retryDeletes(ctx)
	c.forgetPreempted()
	n := len(c.live)
	switch r := c.rng.Intn(100); {
	case r < 12:
		c.addExtra(ctx) // a worker the autoscaler adds
		return
	case r < 18:
		c.deleteExtra(ctx) // and one it removes
		return
	}
	if n < minLive || (n < maxLive && c.rng.Intn(100) < 60) {
		c.submit(ctx)
	} else {
		c.deleteOne(ctx)
	}
}

// submit creates one gang of a random shape and priority: a quarter
// opportunistic (-1), the rest guaranteed at 0, 10 or 100 (so that gangs of
// one VC preempt each other), a third of those with lazy preemption.
func (c *churn) submit(ctx context.Context) {
	c.seq++
	g := &gang{name: fmt.Sprintf("c%d", c.seq), created: time.Now()}
	if c.rng.Intn(4) == 0 {
		g.shape = opportunisticShapes[c.rng.Intn(len(opportunisticShapes))]
		g.priority = -1
	} else {
		g.shape = guaranteedShapes[c.rng.Intn(len(guaranteedShapes))]
		g.priority = []int{0, 0, 10, 10, 100}[c.rng.Intn(5)]
		g.lazy = c.rng.Intn(3) == 0
	}
	// A third of the gangs are written as Workload API pod groups: they go
	// through Kubernetes 1.37's pod-group scheduling cycle. Half the native
	// ones are elastic (max-members); Workload API gangs always are.
	g.workload = c.rng.Intn(3) == 0
	g.elastic = !g.workload && c.rng.Intn(2) == 0
	failed := false
	if g.workload {
		if _, err := c.h.kube.SchedulingV1beta1().PodGroups(g.ns).Create(ctx, g.podGroup(), metav1.CreateOptions{}); err != nil {
			c.stats.Lock()
			c.stats.apiErrors++
			c.stats.Unlock()
			c.deleteGang(ctx, g)
			return
		}
		c.stats.Lock()
		c.stats.workloadGangs++
		c.stats.Unlock()
	}
	for _, p := range g.pods() {
		_, err := c.h.kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		c.stats.Lock()
		if err != nil {
			c.stats.apiErrors++
			failed = true
		} else {
			c.stats.podsCreated++
		}
		c.stats.Unlock()
	}
	if failed {
		// The API server is down (its restart): a gang with members
		// missing would wait in PreEnqueue for ever, so it goes whole.
		c.deleteGang(ctx, g)
		return
	}
	c.live[g.key()] = g
	c.stats.Lock()
	c.stats.submitted++
	c.stats.Unlock()
	if g.n > 1 {
		// Complete now: PreEnqueue lets its members go, the scheduler
		// reserves them one by one and Permit holds them for each other.
		c.h.fire("mid-permit")
	}
}

// deleteOne deletes a random live gang, whole, at once (grace 0).
func (c *churn) deleteOne(ctx context.Context) {
	if len(c.live) == 0 {
		return
	}
	keys := make([]string, 0, len(c.live))
	for k := range c.live {
		keys = append(keys, k)
	}
	sort.Strings(keys) // map order is random: the seed must decide
	g := c.live[keys[c.rng.Intn(len(keys))]]
	delete(c.live, g.key())
	c.stats.Lock()
	c.stats.deleted++
	c.stats.Unlock()
	c.deleteGang(ctx, g)
}

// forgetPreempted drops gangs whose pods are all gone although the driver
// did not delete them: the scheduler preempted them.
func (c *churn) forgetPreempted() {
	for k, g := range c.live {
		if time.Since(g.created) > 5*time.Second && len(c.h.podsOf(g)) == 0 {
			delete(c.live, k)
			c.stats.Lock()
			c.stats.preempted++
			c.stats.Unlock()
		}
	}
}

// gangs returns the live gangs (under the caller's pause).
func (c *churn) gangs() []*gang {
	out := make([]*gang, 0, len(c.live))
	for _, g := range c.live {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// deleteAll deletes every live gang (the end of a run).
func (c *churn) deleteAll(ctx context.Context) {
	for _, g := range c.gangs() {
		delete(c.live, g.key())
		c.deleteGang(ctx, g)
	}
}

// deleteGang deletes g's pods with grace 0, noting their names first so
// that the victim trigger does not take them for preemption victims. A pod
// whose deletion fails (the API server is down) is retried at the next
// step: a gang the driver deleted in part would stay partly bound.
func (c *churn) deleteGang(ctx context.Context, g *gang) {
	for i := 0; i < g.n; i++ {
		c.undeleted = append(c.undeleted, [2]string{g.ns, fmt.Sprintf("%s-%d", g.name, i)})
	}
	for _, x := range g.extras {
		c.undeleted = append(c.undeleted, [2]string{g.ns, x})
	}
	g.extras = nil
	if g.workload {
		c.undeletedPodGroups = append(c.undeletedPodGroups, [2]string{g.ns, g.name})
	}
	c.retryDeletes(ctx)
}

func (c *churn) retryDeletes(ctx context.Context) {
	zero := int64(0)
	var failed [][2]string
	for _, p := range c.undeleted {
		c.h.mu.Lock()
		c.h.driverDeleted[p[0]+"/"+p[1]] = true
		c.h.mu.Unlock()
		err := c.h.kube.CoreV1().Pods(p[0]).Delete(ctx, p[1], metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			failed = append(failed, p)
			c.stats.Lock()
			c.stats.apiErrors++
			c.stats.Unlock()
		}
	}
	c.undeleted = failed
	var pgFailed [][2]string
	for _, pg := range c.undeletedPodGroups {
		err := c.h.kube.SchedulingV1beta1().PodGroups(pg[0]).Delete(ctx, pg[1], metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			pgFailed = append(pgFailed, pg)
		}
	}
	c.undeletedPodGroups = pgFailed
}

// addExtra adds an extra pod to a random live elastic gang whose minimum is
// bound (as Ray's autoscaler adds a worker to a running cluster): of the
// gang's size or of one GPU, written in the gang's form.
func (c *churn) addExtra(ctx context.Context) {
	var cands []*gang
	for _, g := range c.gangs() {
		if (g.workload || g.elastic) && len(g.extras) < maxExtras {
			bound := 0
			for _, p := range c.h.podsOf(g) {
				if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
					bound++
				}
			}
			if bound == g.n {
				cands = append(cands, g)
			}
		}
	}
	if len(cands) == 0 {
		return
	}
	g := cands[c.rng.Intn(len(cands))]
	gpus := g.gpus
	if c.rng.Intn(2) == 0 {
		gpus = 1
	}
	c.seq++
	name := fmt.Sprintf("%s-x%d", g.name, c.seq)
	p := util.GangPods(g.ns, g.name, g.vc, g.priority, 1, gpus, "hivesched")[0]
	p.Name = name
	g.inForm(p)
	// For the checks, an extra is a gang of one pod (it is a one-pod
	// group of its own in the core).
	p.Labels[labelGang] = name
	p.Annotations[annotationMembers] = "1"
	_, err := c.h.kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
	c.stats.Lock()
	defer c.stats.Unlock()
	if err != nil {
		c.stats.apiErrors++
		return
	}
	c.stats.podsCreated++
	c.stats.extrasCreated++
	g.extras = append(g.extras, name)
}

// deleteExtra deletes a random extra pod of a live gang (the autoscaler
// removing an idle worker): never a loss of its gang's.
func (c *churn) deleteExtra(ctx context.Context) {
	var cands []*gang
	for _, g := range c.gangs() {
		if len(g.extras) > 0 {
			cands = append(cands, g)
		}
	}
	if len(cands) == 0 {
		return
	}
	g := cands[c.rng.Intn(len(cands))]
	i := c.rng.Intn(len(g.extras))
	c.undeleted = append(c.undeleted, [2]string{g.ns, g.extras[i]})
	g.extras = append(g.extras[:i], g.extras[i+1:]...)
	c.stats.Lock()
	c.stats.extrasDeleted++
	c.stats.Unlock()
	c.retryDeletes(ctx)
}
