package podrequest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

// Elastic gangs (docs/elastic.md). A framework gang (a scheduler-plugins
// PodGroup's minMember, a Workload API gang's minCount) whose pods are
// more than its minimum is elastic: the minimum is placed whole, as any
// gang, and each pod beyond it is an extra pod, placed by itself once the
// minimum runs (a one-pod affinity group of its own, spec.ExtraOf naming
// the gang). Which pods make the minimum:
//
//  1. the pods placed in it (their placement record names the gang), and
//     those read as its members before (a read is kept: the pods a
//     controller creates at once may reach the scheduler in another order
//     than their names sort, and the first read decides);
//  2. if fewer than the minimum are placed in it (a member is gone and an
//     extra of its size was promoted into its slot, PromoteExtra, before
//     its record says so), the pods placed (bound) as extras, oldest
//     first; but while the minimum is whole, a pod placed as an extra
//     stays one, whatever is created after it;
//  3. then the pods not placed yet, oldest first (creationTimestamp), so
//     that pods an autoscaler adds later are the extras; of pods created
//     in the same second, those without leaf cells first (a Ray head, an
//     MPI launcher, a Spark driver: the coordinator its workers cannot run
//     without, created with them), then by name.
//
// An extra pod without leaf cells holds no cells and waits for nothing: it
// is not hivesched's to place (the profile's other plugins place it).

// Role is which part of its gang a pod was placed as.
type Role uint8

const (
	RoleNone    Role = iota // no placement record
	RoleMinimum             // placed as a member of its gang's minimum
	RoleExtra               // placed as an extra pod
)

// ExtraSeparator joins a gang's name and its extra pod's name into the
// extra's group name ("ns/gang+pod"): '+' is in no object name, so no
// gang's name can be an extra's.
const ExtraSeparator = "+"

// ExtraGroupName is the group name of gang's extra pod podName.
func ExtraGroupName(gang, podName string) string { return gang + ExtraSeparator + podName }

// GangOfExtra is the gang an extra's group name names ("" if the name is
// not an extra's).
func GangOfExtra(group string) string {
	if i := strings.LastIndex(group, ExtraSeparator); i > 0 {
		return group[:i]
	}
	return ""
}

// minimumOf splits a gang's pods into its minimum (minCount pods, in the
// order above) and says whether pod is beyond it (an extra).
func minimumOf(pods []*v1.Pod, minCount int32, leaves map[*v1.Pod]int64, pod *v1.Pod, role func(*v1.Pod) Role) ([]*v1.Pod, bool) {
	roleOf := func(p *v1.Pod) Role {
		if role == nil {
			return RoleNone
		}
		r := role(p)
		if r == RoleExtra && p.Spec.NodeName == "" {
			return RoleNone // an extra not placed yet may still be a member
		}
		return r
	}
	// Each pod's rank once (a role is a lookup under the index's lock),
	// then the sort.
	type ranked struct {
		p    *v1.Pod
		rank int
	}
	rs := make([]ranked, len(pods))
	for i, p := range pods {
		r := 2
		switch roleOf(p) {
		case RoleMinimum:
			r = 0
		case RoleExtra:
			r = 1
		}
		rs[i] = ranked{p, r}
	}
	slices.SortStableFunc(rs, func(a, b ranked) int {
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		if c := a.p.CreationTimestamp.Time.Compare(b.p.CreationTimestamp.Time); c != 0 {
			return c
		}
		if ca, cb := leaves[a.p] == 0, leaves[b.p] == 0; ca != cb {
			if ca {
				return -1
			}
			return 1
		}
		return strings.Compare(a.p.Name, b.p.Name)
	})
	sorted := make([]*v1.Pod, len(rs))
	for i, r := range rs {
		sorted[i] = r.p
	}
	if int32(len(sorted)) <= minCount {
		return sorted, false
	}
	minimum := sorted[:minCount]
	extra := true
	for _, p := range minimum {
		if p.UID == pod.UID {
			extra = false
		}
	}
	return minimum, extra
}

// extraShape is the group-members shape a gang's extra pod is parsed
// with: one pod, its own size (asExtra then names it).
const extraShape = "1"

// asExtra turns the request parsed for one of a gang's extra pods (with
// extraShape, under the gang's name) into the extra's own: one pod of its
// leaf cells, a group of its own tied to the gang.
func asExtra(req *Request, pod *v1.Pod) *Request {
	x := *req
	x.Group.ExtraOf = req.Group.Name
	x.Group.Name = ExtraGroupName(req.Group.Name, pod.Name)
	x.Group.Members = []cellcore.AffinityGroupMember{{PodNumber: 1, LeafCellNumber: req.LeafCellNumber}}
	x.CellLessPods = 0
	return &x
}

// fromNativeElastic is the request of a pod of a native-form elastic gang
// (label hivesched.io/affinity-group, annotation hivesched.io/group-members
// the minimum, hivesched.io/max-members the most pods). handled is false
// for any other pod. The minimum is filled as the shape says, pod by pod in
// minimumOf's order, each pod of a size the shape still has room for; the
// others are extras, at most max-members in all.
func (r *Resolver) fromNativeElastic(pod *v1.Pod) (*Request, error, bool) {
	raw, ok := pod.Annotations[AnnotationMaxMembers]
	name := pod.Labels[LabelAffinityGroup]
	if !ok || name == "" {
		return nil, nil, false
	}
	what := fmt.Sprintf("elastic affinity group %s/%s", pod.Namespace, name)
	max, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 32)
	if err != nil || max <= 0 {
		return nil, fmt.Errorf("annotation %s=%q is not a positive number of pods", AnnotationMaxMembers, raw), true
	}
	own, err := r.PodLeaves(pod)
	if err != nil {
		return nil, err, true
	}
	slots, cellLess, err := parseMembers(pod.Annotations[AnnotationGroupMembers], int32(own))
	if err != nil {
		return nil, err, true
	}
	minCount := int64(cellLess)
	room := map[int64]int32{0: cellLess}
	for _, m := range slots {
		minCount += int64(m.PodNumber)
		room[int64(m.LeafCellNumber)] += m.PodNumber
	}
	if max < minCount {
		return nil, fmt.Errorf("annotation %s=%d is below the gang's minimum of %d pods (annotation %s)", AnnotationMaxMembers, max, minCount, AnnotationGroupMembers), true
	}
	if r.lookups.GangPods == nil {
		return nil, nil, false // no view of the gang's pods: the minimum alone, as a fixed gang
	}
	key, _ := GangKeyOf(pod)
	pods := r.lookups.GangPods(key)
	leaves, err := r.gangLeaves(pods, what)
	if err != nil {
		return nil, err, true
	}
	sorted, _ := minimumOf(pods, int32(len(pods)), leaves, pod, r.lookups.RecordedRole)
	extra, position := false, 0
	for _, p := range sorted {
		n := leaves[p]
		inMinimum := room[n] > 0
		if inMinimum {
			room[n]--
		} else {
			position++
		}
		if p.UID == pod.UID {
			extra = !inMinimum
			break
		}
	}
	if !extra {
		return nil, nil, false // a member of the minimum: the native form as it is
	}
	if int64(position)+minCount > max {
		return nil, fmt.Errorf("%s has more pods than its %s=%d: this pod is one too many (its minimum is %d)", what, AnnotationMaxMembers, max, minCount), true
	}
	if own == 0 {
		return nil, nil, true // an extra without leaf cells: not hivesched's to place
	}
	q := pod.DeepCopy()
	q.Annotations[AnnotationGroupMembers] = extraShape
	req, err := Parse(q, r.resource)
	if err != nil || req == nil {
		return req, err, true
	}
	return asExtra(req, pod), nil, true
}
