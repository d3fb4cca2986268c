// Package chaos kills the scheduler under churn on the local cluster of
// hack/local-up.sh, run with two scheduler replicas under leader election
// (HIVESCHED_REPLICAS=2), and checks from API objects alone that nothing is
// double-booked, no gang stays partly bound, every bound pod has its
// placement, no VC's guaranteed groups use more than its cells, VC status
// converges, and everything that fits is bound once churn stops
// (docs/chaos.md). It is skipped unless HIVESCHED_CHAOS_KUBECONFIG names the
// local cluster's kubeconfig; `make chaos` sets it. It talks to 127.0.0.1
// only, and stops by itself: every loop and wait is bounded.
package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hivesched/hivesched/apis/generated/clientset/versioned"
	"github.com/hivesched/hivesched/cmd/hivesched-sim/sim"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/hivesched"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/test/util"
)

const envKubeconfig = "HIVESCHED_CHAOS_KUBECONFIG"

type options struct {
	kills int
	seed  int64
	// timeout bounds the whole run; the kill loop stops early if it is near.
	timeout time.Duration
	// checkpointEvery: a quiet checkpoint (churn paused) after this many kills.
	checkpointEvery int
	// gangWindow: how long a gang may stay partly bound, or a VC's
	// guaranteed use above its cells, before it is a violation.
	gangWindow time.Duration
	// fitBound: after churn stops, everything that fits is bound (and no
	// pod is terminating, no gang partly bound) within this.
	fitBound time.Duration
	// statusBound: the VCs' status equals the truth within this after the
	// cluster settled.
	statusBound time.Duration
	// takeoverBound: the standby leads within this after the leader died.
	takeoverBound time.Duration
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return n
}

func loadOptions(t *testing.T) options {
	o := options{
		kills:         envInt(t, "CHAOS_KILLS", 10),
		seed:          int64(envInt(t, "CHAOS_SEED", 1)),
		gangWindow:    60 * time.Second,
		fitBound:      120 * time.Second,
		statusBound:   30 * time.Second,
		takeoverBound: 60 * time.Second,
	}
	o.checkpointEvery = envInt(t, "CHAOS_CHECKPOINT_EVERY", 10)
	// About 20 s a kill on two shared cores, plus checkpoints and margin.
	o.timeout = time.Duration(envInt(t, "CHAOS_TIMEOUT_SECONDS", 300+o.kills*60)) * time.Second
	return o
}

// figures are what a run prints (and writes to _output/chaos).
type figures struct {
	Seed          int64          `json:"seed"`
	Kills         int            `json:"kills"`
	KillsByMoment map[string]int `json:"killsByMoment"`
	// Kills after which the API showed a gang partly bound, or victims
	// still terminating: the new leader had to finish what the old began.
	KillsLeavingPartialGang     int               `json:"killsLeavingPartialGang"`
	KillsWithVictimsTerminating int               `json:"killsWithVictimsTerminating"`
	Gangs                       int               `json:"gangsSubmitted"`
	WorkloadGangs               int               `json:"workloadGangs"` // of Gangs, written as Workload API pod groups
	GangsDeleted                int               `json:"gangsDeletedByDriver"`
	GangsPreempted              int               `json:"gangsPreempted"`
	ExtrasCreated               int               `json:"extraPodsCreated"`
	ExtrasDeleted               int               `json:"extraPodsDeletedByDriver"`
	PodsCreated                 int               `json:"podsCreated"`
	PodsBound                   int               `json:"podsBound"`
	VictimDeletions             int               `json:"victimPodDeletions"`
	APIErrors                   int               `json:"driverAPIErrors"`
	TakeoverMS                  []int64           `json:"takeoverMs"`
	RecoveredMS                 []int64           `json:"recoveredMs"`
	UnplannedExits              int               `json:"unplannedReplicaExits"`
	APIServerRestart            string            `json:"apiserverRestart"`
	NodeRemoved                 string            `json:"nodeRemoved"`
	Checks                      int               `json:"snapshotsChecked"`
	MaxPartialGang              time.Duration     `json:"maxPartialGangNs"`
	MaxOverCap                  time.Duration     `json:"maxOverCapNs"`
	Checkpoints                 int               `json:"checkpoints"`
	SettleMS                    []int64           `json:"settleMs"`
	StatusLagMS                 []int64           `json:"statusLagMs"`
	Events                      map[string]int    `json:"events"`
	Violations                  int               `json:"violations"`
	Duration                    time.Duration     `json:"durationNs"`
	Options                     map[string]string `json:"options"`
}

type harness struct {
	t         *testing.T
	o         options
	rng       *rand.Rand // the kill loop's
	root      string
	localDir  string
	apiPort   int // kube-apiserver's, as hack/local-up.sh started it
	kube      kubernetes.Interface
	vcs       versioned.Interface
	cfg       cellcore.Config
	key       []byte
	caps      map[string]map[string]int32
	podLister listersv1.PodLister
	churn     *churn
	scriptMu  sync.Mutex

	mu            sync.Mutex // guards what follows
	fig           figures
	violations    []string
	episodes      map[string]map[string]*episode
	driverDeleted map[string]bool
	bound         map[string]bool
	armed         string
	fired         chan string
}

func TestChaos(t *testing.T) {
	kc := os.Getenv(envKubeconfig)
	if kc == "" {
		t.Skip("no local cluster: run `make chaos` (it brings one up with two scheduler replicas), or set " + envKubeconfig)
	}
	h := newHarness(t, kc, loadOptions(t))
	h.run()
}

func newHarness(t *testing.T, kubeconfig string, o options) *harness {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cfg.Host, "https://127.0.0.1:") {
		t.Fatalf("%s names %s: the chaos run kills processes and deletes nodes, so it only talks to the local cluster on 127.0.0.1", kubeconfig, cfg.Host)
	}
	jc := rest.CopyConfig(cfg)
	jc.ContentType = "application/json" // CRD types have no protobuf
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(wd, "..", "..")
	h := &harness{
		t: t, o: o, rng: rand.New(rand.NewSource(o.seed)), root: root, localDir: util.LocalDir(root),
		kube: kubernetes.NewForConfigOrDie(cfg), vcs: versioned.NewForConfigOrDie(jc),
		episodes: map[string]map[string]*episode{}, driverDeleted: map[string]bool{}, bound: map[string]bool{},
		fired: make(chan string, 1),
	}
	h.fig.Seed, h.fig.KillsByMoment, h.fig.Events = o.seed, map[string]int{}, map[string]int{}
	for _, r := range replicas {
		if _, ok := h.pid(r); !ok {
			t.Fatalf("scheduler replica %s is not running: bring the cluster up with HIVESCHED_REPLICAS=2 (make chaos does)", r)
		}
	}
	if h.apiPort, err = util.LocalPort(root, "APISERVER_PORT"); err != nil {
		t.Fatal(err)
	}
	// The physical cluster as the running scheduler reads it.
	if h.cfg, err = sim.LoadCluster(filepath.Join(h.localDir, "scheduler-config.yaml")); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if h.key, err = placement.LoadKey(ctx, h.kube); err != nil {
		t.Fatal(err)
	}
	vcs, err := h.vcs.HiveschedV1alpha1().VirtualClusters().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h.caps, err = capacities(h.cfg, vcs.Items); err != nil {
		t.Fatal(err)
	}
	h.churn = newChurn(h, o.seed+1)
	return h
}

// watch starts an informer on the driver's pods: it counts binds and victim
// deletions and fires the armed kill trigger.
func (h *harness) watch(ctx context.Context) {
	f := informers.NewSharedInformerFactoryWithOptions(h.kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = labelChaos + "=true"
	}))
	inf := f.Core().V1().Pods()
	h.podLister = inf.Lister()
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		// Seen bound at once: bound while the watch was down (the API
		// server's restart), found by the relist.
		AddFunc: func(obj any) {
			if p := obj.(*v1.Pod); p.Spec.NodeName != "" {
				h.mu.Lock()
				h.bound[string(p.UID)] = true
				h.mu.Unlock()
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, p := oldObj.(*v1.Pod), newObj.(*v1.Pod)
			id := p.Namespace + "/" + p.Name
			if old.Spec.NodeName == "" && p.Spec.NodeName != "" {
				h.mu.Lock()
				h.bound[string(p.UID)] = true
				h.mu.Unlock()
				if n, _ := strconv.Atoi(p.Annotations[annotationMembers]); n > 1 && h.boundMembers(p) < n {
					h.fire("mid-bind")
				}
			}
			if old.DeletionTimestamp == nil && p.DeletionTimestamp != nil {
				h.mu.Lock()
				ours := h.driverDeleted[id]
				if !ours {
					h.fig.VictimDeletions++
				}
				h.mu.Unlock()
				if !ours {
					h.fire("victims-deleting")
				}
			}
		},
	})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
}

func (h *harness) boundMembers(p *v1.Pod) int {
	ps, _ := h.podLister.Pods(p.Namespace).List(labels.SelectorFromSet(labels.Set{labelGang: p.Labels[labelGang]}))
	n := 0
	for _, q := range ps {
		if q.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

func (h *harness) podsOf(g *gang) []*v1.Pod {
	ps, _ := h.podLister.Pods(g.ns).List(labels.SelectorFromSet(labels.Set{labelGang: g.name}))
	return ps
}

func (h *harness) arm(moment string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed = moment
	select {
	case <-h.fired:
	default:
	}
}

func (h *harness) fire(moment string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.armed != moment {
		return
	}
	h.armed = ""
	select {
	case h.fired <- moment:
	default:
	}
}

func (h *harness) run() {
	t := h.t
	ctx, cancel := context.WithTimeout(t.Context(), h.o.timeout)
	defer cancel()
	start := time.Now()
	t.Logf("chaos: seed %d, %d kills, run bound %v, gang window %v, settle bound %v, status bound %v",
		h.o.seed, h.o.kills, h.o.timeout, h.o.gangWindow, h.o.fitBound, h.o.statusBound)
	h.watch(ctx)
	h.deleteLeftovers(ctx)
	if err := h.waitLeader(ctx, h.o.takeoverBound); err != nil {
		t.Fatal(err)
	}

	churnCtx, stopChurn := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); h.churn.run(churnCtx) }()
	go func() { defer wg.Done(); h.monitor(churnCtx) }()

	nodeAt, apiAt := max(1, h.o.kills/3), max(2, 2*h.o.kills/3)
	for i := 1; i <= h.o.kills; i++ {
		if left := time.Until(start.Add(h.o.timeout)); left < 3*time.Minute {
			h.mu.Lock()
			h.violate(fmt.Sprintf("the run's time bound (%v) is near after %d kills: stopping", h.o.timeout, i-1))
			h.mu.Unlock()
			break
		}
		if err := h.ensureReplicas(ctx, ""); err != nil {
			h.mu.Lock()
			h.violate("before kill " + strconv.Itoa(i) + ": " + err.Error())
			h.mu.Unlock()
			break
		}
		var node *v1.Node
		if i == nodeAt {
			node = h.removeNode(ctx)
		}
		if i == apiAt {
			h.restartAPIServer(ctx)
			if err := h.ensureReplicas(ctx, ""); err != nil {
				h.mu.Lock()
				h.violate("after the kube-apiserver restart: " + err.Error())
				h.mu.Unlock()
				break
			}
		}
		if err := h.killLeader(ctx, i); err != nil {
			h.mu.Lock()
			h.violate(fmt.Sprintf("kill %d: %v", i, err))
			h.mu.Unlock()
			break
		}
		if node != nil {
			h.readdNode(ctx, node)
		}
		if i%h.o.checkpointEvery == 0 && i != h.o.kills {
			h.checkpoint(ctx, fmt.Sprintf("after kill %d", i))
		}
	}
	stopChurn()
	wg.Wait()
	if err := h.ensureReplicas(ctx, ""); err != nil {
		h.mu.Lock()
		h.violate("after the kills: " + err.Error())
		h.mu.Unlock()
	}
	h.churn.pause() // for good: the churn has stopped
	h.checkpointPaused(ctx, "churn stopped")
	h.countEvents(ctx)
	h.churn.deleteAll(context.Background())
	h.deleteLeftovers(context.Background())
	h.fig.Duration = time.Since(start)
	h.report()
}

// monitor checks a snapshot every second while the churn runs.
func (h *harness) monitor(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		if s, err := h.take(ctx); err == nil {
			h.check(s, "under churn")
		}
	}
}

// killLeader kill -9s the leading replica at a moment of one of four kinds
// (drawn from the seed): any moment; while a gang is in Permit (0-200 ms
// after the driver created the last member of a multi-pod gang: its members
// are being reserved and wait for each other); while a gang is half bound
// (a member's bind just arrived, others may be in flight); or while
// preemption victims are being deleted (a deletion the driver did not ask
// for just began). Then it measures the standby's takeover, restarts the
// killed replica as the new standby, and checks a snapshot.
func (h *harness) killLeader(ctx context.Context, i int) error {
	moment := []string{"any", "mid-permit", "mid-bind", "victims-deleting"}[h.rng.Intn(4)]
	delay := time.Duration(h.rng.Intn(3000)) * time.Millisecond
	if moment == "any" {
		time.Sleep(delay)
	} else {
		h.arm(moment)
		select {
		case <-h.fired:
			if moment == "mid-permit" {
				time.Sleep(delay / 15)
			}
		case <-time.After(20 * time.Second):
			h.arm("")
			moment += " (not seen in 20 s: any)"
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ls := h.leaders()
	l, err := h.lease(ctx)
	if err != nil || len(ls) != 1 {
		// The leader exited meanwhile (a lease it could not renew in
		// time): let the standby take over first, and kill that one.
		if err := h.ensureReplicas(ctx, ""); err != nil {
			return err
		}
		moment += " (after a leader change)"
		ls = h.leaders()
		if l, err = h.lease(ctx); err != nil || len(ls) != 1 {
			return fmt.Errorf("no single leader to kill: %v (lease: %v)", ls, err)
		}
	}
	old, victim := holder(l), ls[0]
	standby := replicas[0]
	if victim == standby {
		standby = replicas[1]
	}
	killed := time.Now()
	if err := h.kill9(victim); err != nil {
		return err
	}
	h.mu.Lock()
	h.fig.Kills++
	h.fig.KillsByMoment[moment]++
	h.mu.Unlock()
	h.stateAtKill(ctx)

	// Takeover: the lease names another holder, which is the standby.
	var took time.Duration
	for {
		if l, err := h.lease(ctx); err == nil && holder(l) != old && holder(l) != "" {
			took = time.Since(killed)
			if l.Spec.AcquireTime != nil {
				took = l.Spec.AcquireTime.Sub(killed)
			}
			break
		}
		if time.Since(killed) > h.o.takeoverBound {
			return fmt.Errorf("the standby did not take the lease within %v of the leader's kill", h.o.takeoverBound)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var recovered time.Duration
	for !h.logHas(standby, logRecovered) {
		if time.Since(killed) > h.o.takeoverBound {
			return fmt.Errorf("the new leader %s did not recover within %v of the kill (log: %s)", standby, h.o.takeoverBound, h.tail(standby))
		}
		time.Sleep(50 * time.Millisecond)
	}
	recovered = time.Since(killed)
	if got := h.leaders(); len(got) != 1 || got[0] != standby {
		return fmt.Errorf("after killing %s the replicas leading are %v, want the standby %s", victim, got, standby)
	}
	h.mu.Lock()
	h.fig.TakeoverMS = append(h.fig.TakeoverMS, took.Milliseconds())
	h.fig.RecoveredMS = append(h.fig.RecoveredMS, recovered.Milliseconds())
	h.mu.Unlock()
	h.t.Logf("kill %d (%s): %s killed, %s took the lease after %v, recovered after %v",
		i, moment, victim, standby, took.Round(time.Millisecond), recovered.Round(time.Millisecond))
	if err := h.ensureReplicas(ctx, victim); err != nil {
		return err
	}
	if s, err := h.take(ctx); err == nil {
		h.check(s, fmt.Sprintf("after kill %d", i))
	}
	return nil
}

// stateAtKill counts, right after a kill, what the dead leader left in
// flight: gangs partly bound and pods terminating (victims). It shows which
// kills hit the moments they aimed at.
func (h *harness) stateAtKill(ctx context.Context) {
	s, err := h.take(ctx)
	if err != nil {
		return
	}
	partial, terminating := 0, 0
	for _, g := range gangs(s) {
		if g.partial() {
			partial++
		}
		terminating += g.terminating
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if partial > 0 {
		h.fig.KillsLeavingPartialGang++
	}
	if terminating > 0 {
		h.fig.KillsWithVictimsTerminating++
	}
}

// removeNode deletes the node that runs the most of the driver's pods (its
// pods stay bound to it: no node controller runs) and returns it for
// readdNode.
func (h *harness) removeNode(ctx context.Context) *v1.Node {
	count := map[string]int{}
	best := ""
	// Early in a short run the churn may not have bound anything yet.
	for t0 := time.Now(); best == "" && time.Since(t0) < time.Minute; time.Sleep(500 * time.Millisecond) {
		clear(count)
		if ps, err := h.podLister.List(labels.Everything()); err == nil {
			for _, p := range ps {
				if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
					count[p.Spec.NodeName]++
				}
			}
		}
		for n, c := range count {
			if best == "" || c > count[best] || (c == count[best] && n < best) {
				best = n
			}
		}
	}
	if best == "" {
		h.mu.Lock()
		h.violate("no node ran a pod of the driver within a minute: none removed")
		h.mu.Unlock()
		return nil
	}
	n, err := h.kube.CoreV1().Nodes().Get(ctx, best, metav1.GetOptions{})
	if err == nil {
		err = h.kube.CoreV1().Nodes().Delete(ctx, best, metav1.DeleteOptions{})
	}
	if err != nil {
		h.mu.Lock()
		h.violate("removing node " + best + ": " + err.Error())
		h.mu.Unlock()
		return nil
	}
	h.t.Logf("node %s deleted with %d running pods of the driver", best, count[best])
	h.mu.Lock()
	h.fig.NodeRemoved = fmt.Sprintf("%s (%d running pods)", best, count[best])
	h.mu.Unlock()
	return n
}

// readdNode creates the node again, as local-up.sh does (status accepted on
// create), and waits until kwok has it Ready.
func (h *harness) readdNode(ctx context.Context, n *v1.Node) {
	away := time.Now()
	nn := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, Annotations: n.Annotations},
		Spec: v1.NodeSpec{Unschedulable: n.Spec.Unschedulable}, Status: v1.NodeStatus{Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable, NodeInfo: n.Status.NodeInfo}}
	if _, err := h.kube.CoreV1().Nodes().Create(ctx, nn, metav1.CreateOptions{}); err != nil {
		h.mu.Lock()
		h.violate("re-adding node " + n.Name + ": " + err.Error())
		h.mu.Unlock()
		return
	}
	for !h.nodeReady(ctx, n.Name) {
		if time.Since(away) > time.Minute {
			h.mu.Lock()
			h.violate("node " + n.Name + " not Ready within a minute of being re-added")
			h.mu.Unlock()
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.t.Logf("node %s re-added, Ready after %v", n.Name, time.Since(away).Round(time.Millisecond))
	h.mu.Lock()
	h.fig.NodeRemoved += ", re-added after a kill"
	h.mu.Unlock()
}

// restartAPIServer kill -9s kube-apiserver and brings it back with
// hack/local-up.sh (which starts what is not running and waits for /readyz).
// The leader cannot renew its lease meanwhile: it may exit, and the next
// ensureReplicas restarts it (an unplanned exit).
func (h *harness) restartAPIServer(ctx context.Context) {
	t0 := time.Now()
	if err := h.kill9("kube-apiserver"); err != nil {
		h.mu.Lock()
		h.violate("killing kube-apiserver: " + err.Error())
		h.mu.Unlock()
		return
	}
	// Gone, its port too, before local-up.sh looks (it refuses to start
	// one on a port somebody holds): a killed process's main thread is a
	// zombie before its other threads have closed its sockets.
	for time.Since(t0) < 10*time.Second {
		_, alive := h.pid("kube-apiserver")
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(h.apiPort)), time.Second)
		if err == nil {
			_ = c.Close()
		}
		if !alive && err != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	err := h.localUp(ctx)
	ready := time.Since(t0)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil || !h.apiserverReady(ctx) {
		h.violate(fmt.Sprintf("kube-apiserver did not come back: %v", err))
		return
	}
	h.fig.APIServerRestart = fmt.Sprintf("kill -9, back (local-up.sh done) after %v", ready.Round(time.Millisecond))
	h.t.Logf("kube-apiserver killed and restarted: %v", ready.Round(time.Millisecond))
}

// checkpoint pauses the churn and checks that the cluster settles.
func (h *harness) checkpoint(ctx context.Context, label string) {
	h.churn.pause()
	defer h.churn.resume()
	h.checkpointPaused(ctx, label)
}

// checkpointPaused (churn paused): within fitBound no pod is terminating,
// no gang is partly bound and every pending gang that fits (a core rebuilt
// from the API objects would place it) is bound; then, within statusBound,
// every VC's status equals the truth summed from the pods.
func (h *harness) checkpointPaused(ctx context.Context, label string) {
	t0 := time.Now()
	live := h.churn.gangs()
	var left []string
	settled := time.Duration(-1)
	for time.Since(t0) < h.o.fitBound {
		s, err := h.take(ctx)
		if err != nil {
			left = []string{err.Error()}
		} else {
			h.check(s, label)
			if left = h.unsettled(s, live); len(left) == 0 {
				settled = time.Since(t0)
				break
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	h.mu.Lock()
	h.fig.Checkpoints++
	if settled < 0 {
		h.violate(fmt.Sprintf("%s: not settled within %v of the churn pausing: %s", label, h.o.fitBound, strings.Join(left, "; ")))
		h.mu.Unlock()
		return
	}
	h.fig.SettleMS = append(h.fig.SettleMS, settled.Milliseconds())
	h.mu.Unlock()
	t1 := time.Now()
	for time.Since(t1) < h.o.statusBound {
		s, err := h.take(ctx)
		if err != nil {
			left = []string{err.Error()}
		} else if left = h.statusLag(s); len(left) == 0 {
			lag := time.Since(t1)
			h.mu.Lock()
			h.fig.StatusLagMS = append(h.fig.StatusLagMS, lag.Milliseconds())
			h.mu.Unlock()
			h.t.Logf("checkpoint %s: settled %v after the churn paused (%d gangs live), VC status true %v later",
				label, settled.Round(time.Millisecond), len(live), lag.Round(time.Millisecond))
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	h.mu.Lock()
	h.violate(fmt.Sprintf("%s: VC status not true within %v of settling: %s", label, h.o.statusBound, strings.Join(left, "; ")))
	h.mu.Unlock()
}

// countEvents counts the scheduler's recovery warnings on the driver's pods.
func (h *harness) countEvents(ctx context.Context) {
	for _, ns := range []string{"vision", "speech"} {
		evs, err := h.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, e := range evs.Items {
			switch e.Reason {
			case "RecoveryFailed", "PlacementNotInCache", "PlacementNotTrusted", "PlacementRejected", hivesched.ReasonLazilyPreempted:
				h.fig.Events[e.Reason] += int(max(e.Count, 1))
			}
		}
	}
}

// deleteLeftovers deletes every pod of the driver (an earlier run's too).
func (h *harness) deleteLeftovers(ctx context.Context) {
	zero := int64(0)
	for _, ns := range []string{"vision", "speech"} {
		err := h.kube.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
			metav1.ListOptions{LabelSelector: labelChaos + "=true"})
		if err != nil && !apierrors.IsNotFound(err) {
			h.t.Logf("deleting the driver's pods in %s: %v", ns, err)
		}
	}
}

func stats(ms []int64) string {
	if len(ms) == 0 {
		return "-"
	}
	s := append([]int64(nil), ms...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	p := func(q float64) float64 { return float64(s[int(q*float64(len(s)-1))]) / 1000 }
	return fmt.Sprintf("min %.2f s, median %.2f s, p90 %.2f s, max %.2f s (n=%d)", p(0), p(0.5), p(0.9), p(1), len(s))
}

// report prints the figures, writes them to _output/chaos and fails the
// test on any violation.
func (h *harness) report() {
	t := h.t
	c := &h.churn.stats
	c.Lock()
	h.fig.Gangs, h.fig.WorkloadGangs, h.fig.GangsDeleted, h.fig.GangsPreempted, h.fig.PodsCreated, h.fig.APIErrors =
		c.submitted, c.workloadGangs, c.deleted, c.preempted, c.podsCreated, c.apiErrors
	h.fig.ExtrasCreated, h.fig.ExtrasDeleted = c.extrasCreated, c.extrasDeleted
	c.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fig.PodsBound = len(h.bound)
	h.fig.Options = map[string]string{
		"gangWindow": h.o.gangWindow.String(), "settleBound": h.o.fitBound.String(), "statusBound": h.o.statusBound.String(),
		"takeoverBound": h.o.takeoverBound.String(), "checkpointEvery": strconv.Itoa(h.o.checkpointEvery),
	}
	f := h.fig
	lines := []string{
		fmt.Sprintf("seed %d, %d kills of the leading replica in %v", f.Seed, f.Kills, f.Duration.Round(time.Second)),
		fmt.Sprintf("kill moments: %v; kills after which a gang was partly bound %d, victims still terminating %d",
			f.KillsByMoment, f.KillsLeavingPartialGang, f.KillsWithVictimsTerminating),
		fmt.Sprintf("gangs submitted %d (%d as Workload API pod groups), deleted by the driver %d, preempted (all pods gone) %d; pods created %d, bound %d; victim pod deletions %d; driver API errors %d",
			f.Gangs, f.WorkloadGangs, f.GangsDeleted, f.GangsPreempted, f.PodsCreated, f.PodsBound, f.VictimDeletions, f.APIErrors),
		fmt.Sprintf("elastic gangs: extra pods added %d, deleted by the driver %d (docs/elastic.md)", f.ExtrasCreated, f.ExtrasDeleted),
		fmt.Sprintf("takeover (kill to the standby's lease): %s", stats(f.TakeoverMS)),
		fmt.Sprintf("recovered (kill to the new leader's state rebuilt): %s", stats(f.RecoveredMS)),
		fmt.Sprintf("unplanned replica exits (lost lease): %d; kube-apiserver: %s; node: %s", f.UnplannedExits, f.APIServerRestart, f.NodeRemoved),
		fmt.Sprintf("snapshots checked %d; longest partly bound gang %v (window %v); longest VC guaranteed use above its cells %v",
			f.Checks, f.MaxPartialGang.Round(time.Millisecond), h.o.gangWindow, f.MaxOverCap.Round(time.Millisecond)),
		fmt.Sprintf("checkpoints %d: settled (everything that fits bound) %s (bound %v); VC status true after %s (bound %v)",
			f.Checkpoints, stats(f.SettleMS), h.o.fitBound, stats(f.StatusLagMS), h.o.statusBound),
		fmt.Sprintf("scheduler events on the driver's pods: %v", f.Events),
		fmt.Sprintf("violations: %d", f.Violations),
	}
	fmt.Println("\n== chaos figures")
	for _, l := range lines {
		fmt.Println("  " + l)
	}
	dir := filepath.Join(h.root, "_output", "chaos")
	if err := os.MkdirAll(dir, 0o755); err == nil {
		b, _ := json.MarshalIndent(f, "", "  ")
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("figures-%dkills-seed%d.json", h.o.kills, f.Seed)), b, 0o644)
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("figures-%dkills-seed%d.txt", h.o.kills, f.Seed)), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	}
	for _, v := range h.violations {
		t.Error(v)
	}
	if f.Kills < h.o.kills {
		t.Errorf("only %d of %d kills done", f.Kills, h.o.kills)
	}
}
