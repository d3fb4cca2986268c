package recovery

import (
	"sort"

	v1 "k8s.io/api/core/v1"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/placement"
)

// Recorded is a bound pod and its trusted placement record.
type Recorded struct {
	Pod    *v1.Pod
	Record placement.Record
}

// Group is a running group: its bound pods, with their records.
type Group struct {
	Name string
	Pods []Recorded
}

// Groups gathers the bound, running pods by the group their trusted
// records name, higher priority first (then by name), so that if anything
// no longer fits, the lower priority groups are the ones downgraded.
// Only Allocated groups were persisted: Pending and Preempting ones are
// simply scheduled again. A terminating pod still holds its devices until
// it is gone: its cells count until its deletion. trust returns a pod's
// record if it is trusted; untrusted hears of each pod whose record is not.
func Groups(pods []*v1.Pod, trust func(*v1.Pod) (placement.Record, error), untrusted func(*v1.Pod, error)) []Group {
	byName := map[string][]Recorded{}
	for _, pod := range pods {
		if pod.Spec.NodeName == "" || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		if _, ok := pod.Annotations[placement.Annotation]; !ok {
			continue
		}
		rec, err := trust(pod)
		if err != nil {
			untrusted(pod, err)
			continue
		}
		byName[rec.Group] = append(byName[rec.Group], Recorded{pod, rec})
	}
	groups := make([]Group, 0, len(byName))
	for n, ms := range byName {
		groups = append(groups, Group{Name: n, Pods: ms})
	}
	sort.Slice(groups, func(i, j int) bool {
		a, b := groups[i].Pods[0].Record, groups[j].Pods[0].Record
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		return groups[i].Name < groups[j].Name
	})
	return groups
}

// Recover adds the group back to the core from its pods' records (all
// trusted, all of the group); recorded says whether some record says the
// group had been downgraded.
func (g Group) Recover(core *cellcore.Core) (res cellcore.RecoverResult, recorded bool, err error) {
	var rp []cellcore.RecoveredPod
	var spec *placement.Record
	for i, m := range g.Pods {
		if m.Record.CellLess() {
			continue // a member without cells: nothing of the core's
		}
		rp = append(rp, m.Record.Recovered(m.Pod))
		recorded = recorded || m.Record.Downgraded
		spec = &g.Pods[i].Record
	}
	if spec == nil {
		// Only members without cells run (its GPU members finished or
		// are gone): the core holds nothing of it, the index keeps them
		// as the gang's members.
		return res, false, nil
	}
	res, err = core.RecoverAffinityGroup(spec.Spec(), rp)
	return res, recorded, err
}
