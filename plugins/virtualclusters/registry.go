// Package virtualclusters is the scheduler's view of the VirtualCluster
// objects: it hands each spec to the cell core (a spec the cluster cannot
// host is Rejected, the other VCs keep working), says whether a VC admits a
// namespace's new groups (its lifecycle state and allowedNamespaces), and
// writes each VC's status in the background from the core's counters.
package virtualclusters

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/hivesched/hivesched/apis/generated/clientset/versioned"
	hv1 "github.com/hivesched/hivesched/apis/hivesched/v1alpha1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/cellspec"
	"github.com/hivesched/hivesched/plugins/statuswriter"
)

// Registry holds the VirtualCluster objects as last read, applies their
// specs to the core and writes their statuses.
type Registry struct {
	core      *cellcore.Core
	client    versioned.Interface
	every     time.Duration
	recovered func() bool
	foreign   ForeignPods
	kick      statuswriter.Kick

	mu  sync.Mutex
	vcs map[string]*entry

	// The lent cells as last counted (leafUse).
	useMu  sync.Mutex
	use    map[string]LeafUse
	useAt  time.Time
	useBuf []cellcore.CellRecord
}

type entry struct {
	obj      *hv1.VirtualCluster
	rejected string // why the core refused the spec, or ""
	// physical: why a change of the physical cluster (derived from
	// ResourceSlices) that this VC would not fit waits, or "". The core
	// still holds the spec, on the cells it had (SetPhysicalRejections).
	physical  string
	applied   bool      // the core holds the spec
	lastWrite time.Time // of its status, for the writer's rate limit
}

// ForeignPods names the pods hivesched did not place that hold devices on
// nodes (a VC's CellsLost condition names them).
type ForeignPods interface {
	ForeignPodsOn(nodes []string, max int) (names []string, more int)
}

// Config is what a Registry works with.
type Config struct {
	Core *cellcore.Core
	// Client writes the statuses; Every is the least time between two
	// writes of one VC's status.
	Client versioned.Interface
	Every  time.Duration
	// Recovered reports whether this process holds the cluster's
	// allocations: until then (a standby, or not recovered yet) its view
	// is empty and it writes no status.
	Recovered func() bool
	Foreign   ForeignPods
}

// New returns an empty registry.
func New(cfg Config) *Registry {
	return &Registry{core: cfg.Core, client: cfg.Client, every: cfg.Every, recovered: cfg.Recovered, foreign: cfg.Foreign,
		kick: statuswriter.NewKick(), vcs: map[string]*entry{}}
}

// Changed tells the status writer that a VC's status may have changed (a
// group placed, preempting, deleted, downgraded; a node's health). It
// never blocks: the scheduling path calls it.
func (r *Registry) Changed() { r.kick.Announce() }

// Admits says why a namespace may not start a new group in a VC, or "".
func (r *Registry) Admits(vc, namespace string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.vcs[vc]
	if e == nil {
		for name, o := range r.vcs {
			if o.obj.Annotations[hv1.AnnotationHivedName] == vc {
				return fmt.Sprintf("virtual cluster %q does not exist: VirtualCluster %q was converted from HiveD's %q (Kubernetes names are lowercase), name it in the pod", vc, name, vc)
			}
		}
		return fmt.Sprintf("virtual cluster %q does not exist (kubectl get virtualclusters)", vc)
	}
	if e.rejected != "" {
		return fmt.Sprintf("virtual cluster %q is Rejected: %s", vc, e.rejected)
	}
	switch e.obj.Spec.State {
	case hv1.VirtualClusterDraining, hv1.VirtualClusterStopped:
		return fmt.Sprintf("virtual cluster %q is %s: it admits no new affinity groups", vc, e.obj.Spec.State)
	}
	for _, ns := range e.obj.Spec.AllowedNamespaces {
		if ns == hv1.AllNamespaces || ns == namespace {
			return ""
		}
	}
	return fmt.Sprintf("namespace %q may not use virtual cluster %q (not in its spec.allowedNamespaces)", namespace, vc)
}

// Object returns the VirtualCluster as last read, or nil.
func (r *Registry) Object(vc string) *hv1.VirtualCluster {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.vcs[vc]; e != nil {
		return e.obj
	}
	return nil
}

// States are the lifecycle states of the VCs the scheduler knows (only
// name's if name is set): the spec's state (Active if unset), or Rejected.
func (r *Registry) States(name string) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]string{}
	for n, e := range r.vcs {
		if name != "" && n != name {
			continue
		}
		st := string(e.obj.Spec.State)
		if st == "" {
			st = string(hv1.VirtualClusterActive)
		}
		if e.rejected != "" || e.physical != "" {
			st = string(hv1.VirtualClusterRejected)
		}
		out[n] = st
	}
	return out
}

// Apply hands a VC's spec to the core. A spec the cluster cannot host is
// Rejected (err says why; newlyRejected unless it was refused for the same
// reason before); res lists the groups a shrink downgraded.
func (r *Registry) Apply(vc *hv1.VirtualCluster) (res cellcore.VCChangeResult, newlyRejected bool, err error) {
	res, err = r.core.SetVirtualCluster(cellspec.VirtualCluster(vc))
	r.mu.Lock()
	e := r.vcs[vc.Name]
	if e == nil {
		e = &entry{}
		r.vcs[vc.Name] = e
	}
	e.obj = vc
	wasRejected := e.rejected
	if err != nil {
		e.rejected = err.Error()
	} else {
		e.rejected, e.applied = "", true
	}
	r.mu.Unlock()
	r.Changed()
	return res, err != nil && wasRejected != err.Error(), err
}

// Refresh keeps vc as the newest object of a VC whose spec the core holds
// already (a status write changed it) and reports whether it did; false
// means the spec is to be applied.
func (r *Registry) Refresh(vc *hv1.VirtualCluster) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.vcs[vc.Name]
	same := e != nil && e.obj.Generation == vc.Generation && e.obj.ResourceVersion != "" && e.applied &&
		equality.Semantic.DeepEqual(e.obj.Spec, vc.Spec)
	if same {
		e.obj = vc
	}
	return same
}

// Remove forgets a deleted VC and removes it from the core; res lists the
// running groups it downgraded.
func (r *Registry) Remove(name string) (cellcore.VCChangeResult, error) {
	r.mu.Lock()
	delete(r.vcs, name)
	r.mu.Unlock()
	return r.core.RemoveVirtualCluster(name)
}

// SetPhysicalRejections marks the VCs a refused change of the physical
// cluster would not fit (name: why), and clears the mark of every other VC.
// Their status says Rejected (DoesNotFit) with that message while the
// change waits. The core keeps them on the cells they had, so they are not
// refused new groups (Admits): only the change is held back. It reports
// whether any mark changed.
func (r *Registry) SetPhysicalRejections(reasons map[string]string) bool {
	r.mu.Lock()
	changed := false
	for name, e := range r.vcs {
		if e.physical != reasons[name] {
			e.physical = reasons[name]
			changed = true
		}
	}
	r.mu.Unlock()
	if changed {
		r.Changed()
	}
	return changed
}

// RejectedObjects are the VCs whose spec the core refused, to apply again
// when the physical cluster grew.
func (r *Registry) RejectedObjects() []*hv1.VirtualCluster {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*hv1.VirtualCluster
	for _, e := range r.vcs {
		if e.rejected != "" {
			out = append(out, e.obj)
		}
	}
	return out
}
