package inspect

import (
	"fmt"
	"net/http"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	iv1 "github.com/hivesched/hivesched/apis/inspect/v1"
	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/internal/english"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// group describes one group; full adds who holds its VC's cells
// (the list endpoint leaves it out: it walks the VC's cells).
func (s *Server) group(name string, full bool) (iv1.AffinityGroup, []cellcore.GroupHolder, bool) {
	var (
		st      cellcore.AffinityGroupStatus
		reason  string
		victims []string
		holders []cellcore.GroupHolder
	)
	if full {
		e, ok := s.core.ExplainAffinityGroup(name)
		if !ok {
			return iv1.AffinityGroup{}, nil, false
		}
		st, reason, victims, holders = e.AffinityGroupStatus, e.Reason, e.Victims, e.Holders
	} else {
		var ok bool
		if st, ok = s.core.AffinityGroupStatus(name); !ok {
			return iv1.AffinityGroup{}, nil, false
		}
	}
	g := iv1.AffinityGroup{Name: name, VirtualCluster: st.VirtualCluster, State: st.State.String(), Priority: st.Priority,
		Downgraded: st.Downgraded, Reason: reason, Victims: victims}
	names := map[string]string{}
	for _, pod := range s.groups.Pods(name) {
		names[podrequest.PodKey(pod)] = pod.Namespace + "/" + pod.Name
	}
	for _, pp := range st.Pods {
		g.Pods = append(g.Pods, iv1.Pod{Name: names[pp.PodKey], Node: pp.Node, LeafCellType: pp.LeafCellType,
			LeafCellNumber: pp.LeafCellNumber, LeafCellIndices: pp.LeafCellIndices})
	}
	g.ExtraOf = podrequest.GangOfExtra(name)
	if g.ExtraOf == "" {
		for _, x := range s.core.ExtrasOf(name) {
			g.ExtraPods++
			for _, pod := range s.groups.Pods(x) {
				if pod.Spec.NodeName != "" {
					g.BoundExtraPods++
				}
			}
		}
	}
	return g, holders, true
}

// explainPod answers `kubectl hivesched why`: the pod's group, what it
// waits for, and who holds the cells it could use.
func (s *Server) explainPod(ns, name string) (iv1.PodExplanation, int, error) {
	key := ns + "/" + name
	pod, err := s.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return iv1.PodExplanation{}, http.StatusNotFound, fmt.Errorf("pod %s not found", key)
	}
	if err != nil {
		return iv1.PodExplanation{}, http.StatusInternalServerError, err
	}
	e := iv1.PodExplanation{Pod: key}
	if !s.ours(pod) {
		e.Summary = fmt.Sprintf("pod %s is not scheduled by this scheduler (its schedulerName is %q, this is %q)", key, pod.Spec.SchedulerName, s.scheduler)
		return e, http.StatusOK, nil
	}
	req, err := s.groups.Request(pod)
	switch {
	case err != nil:
		e.Summary = fmt.Sprintf("pod %s cannot be scheduled: its request is invalid: %v", key, err)
		return e, http.StatusOK, nil
	case req == nil:
		e.Summary = fmt.Sprintf("pod %s asks for no leaf cells: hivesched leaves it to the other plugins", key)
		return e, http.StatusOK, nil
	}
	group := req.Group.Name
	g, holders, known := s.group(group, true)
	if !known {
		have, want := s.groups.MemberCount(group), req.TotalPods()
		switch {
		case pod.Spec.NodeName != "":
			e.Summary = fmt.Sprintf("pod %s runs on node %s, but the scheduler does not hold its affinity group %s (it was not bound by hivesched, or its record was not trusted: see the pod's events)", key, pod.Spec.NodeName, group)
		case have < want:
			e.Summary = fmt.Sprintf("pod %s waits for its affinity group %s to be complete: %d of its %d pods exist; the group is placed all at once when every pod is created", key, group, have, want)
		default:
			if reason := s.vcs.Admits(req.Group.VirtualCluster, pod.Namespace); reason != "" {
				e.Summary = fmt.Sprintf("pod %s is refused: %s", key, reason)
			} else {
				e.Summary = fmt.Sprintf("pod %s of affinity group %s is queued: the scheduler has not decided its group yet", key, group)
			}
		}
		return e, http.StatusOK, nil
	}
	e.Group = &g
	for _, h := range holders {
		e.Holders = append(e.Holders, iv1.Holder{Group: h.Group, Priority: h.Priority, LeafCells: h.LeafCells,
			Preemptible: g.Priority >= 0 && h.Priority < g.Priority})
	}
	e.Summary = summarize(key, pod, &g, e.Holders)
	return e, http.StatusOK, nil
}

// summarize says in one or two sentences where a pod's group stands.
func summarize(key string, pod *v1.Pod, g *iv1.AffinityGroup, holders []iv1.Holder) string {
	switch g.State {
	case cellcore.AGAllocated.String():
		where := "its cells are allocated; it binds to its node"
		if pod.Spec.NodeName != "" {
			where = "it runs on node " + pod.Spec.NodeName
		}
		s := fmt.Sprintf("pod %s: affinity group %s is Allocated in virtual cluster %q; %s", key, g.Name, g.VirtualCluster, where)
		if g.Downgraded {
			s += "; it was lazily preempted and runs as opportunistic (priority -1): any guaranteed group may preempt it"
		}
		return s
	case cellcore.AGBeingPreempted.String():
		return fmt.Sprintf("pod %s: affinity group %s is Being preempted: a higher priority group reserved its cells, and its pods are being deleted", key, g.Name)
	case cellcore.AGPreempting.String():
		return fmt.Sprintf("pod %s: affinity group %s is Preempting in virtual cluster %q: it waits for the pods of %s to be deleted, then binds on their cells",
			key, g.Name, g.VirtualCluster, english.JoinNames(g.Victims))
	}
	// The core's reason names the group, its priority and VC.
	s := fmt.Sprintf("pod %s waits: its affinity group is Pending: %s", key, g.Reason)
	var lower []string
	var lowerCells int32
	for _, h := range holders {
		if h.Preemptible {
			lower = append(lower, h.Group)
			lowerCells += h.LeafCells
		}
	}
	if len(lower) > 0 {
		// Preempting them is not enough, or the core would have.
		s += fmt.Sprintf(" (lower priority groups hold %d more of the VC's leaf cells: %s; preempting them is not enough)", lowerCells, strings.Join(lower, ", "))
	}
	return s
}
