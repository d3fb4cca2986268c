package hivesched

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/plugins/cellcore"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/plugins/podrequest"
	"k8s.io/apimachinery/pkg/types"
)

// Elastic gangs in the plugin (docs/elastic.md). podrequest reads which of
// a gang's pods are its minimum and which are extra pods (each a one-pod
// group of its own, named <gang>+<pod>); the core places an extra next to
// its gang once the gang runs and ranks it below every gang's minimum.
// Here: an extra's deletion is no member loss (memberloss.go), an extra
// ends with its gang (lost or preempted), and an extra taken back is told
// so the way Kubernetes tells a preempted pod, so that Ray's autoscaler or
// Spark sees a worker lost, not a crash.

// extraReason is the DisruptionTarget condition's reason on an extra pod
// hivesched takes back: the reason kube-scheduler's own preemption writes.
const extraReason = v1.PodReasonPreemptionByScheduler

// deleteVictim is the victims' evictor's deletion: an extra pod of an
// elastic gang first gets the DisruptionTarget condition (as kube-scheduler
// writes it on the pods it preempts), then is deleted. A gang's own pods
// are deleted as they always were.
func (p *HiveSched) deleteVictim(ctx context.Context, pod *v1.Pod) error {
	group := p.groups.GroupOf(pod)
	gang := podrequest.GangOfExtra(group)
	if gang == "" {
		return p.deleter.Delete(ctx, pod)
	}
	if disruptionCondition(pod) == nil {
		msg := fmt.Sprintf("%s: extra pod of elastic affinity group %s taken back for a gang of its virtual cluster (extra pods are the first taken back)", Name, gang)
		cond := corev1apply.PodCondition().WithType(v1.DisruptionTarget).WithStatus(v1.ConditionTrue).
			WithReason(extraReason).WithMessage(msg).WithLastTransitionTime(metav1.Now())
		apply := corev1apply.Pod(pod.Name, pod.Namespace).WithStatus(corev1apply.PodStatus().WithConditions(cond))
		if _, err := p.handle.ClientSet().CoreV1().Pods(pod.Namespace).ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: Name, Force: true}); err != nil {
			// The deletion is what frees the cells: told or not, it goes.
			klog.FromContext(ctx).V(2).Info("could not set an extra pod's DisruptionTarget condition", "pod", klog.KObj(pod), "err", err)
		}
	}
	return p.deleter.Delete(ctx, pod)
}

// A member of an elastic gang's minimum that goes while an extra pod of its
// size runs is no loss: the extra takes its slot (cellcore.PromoteExtra) and
// the gang runs on. The member's cells are given up only once its pod is
// gone (a terminating pod still holds its devices), so a promotion decided
// while the member terminates waits for that in promotions.
type promotions struct {
	mu sync.Mutex
	// byLost: the lost member's pod -> the extra that takes its slot.
	byLost map[types.UID]promotion
	// records: the placement record a promoted pod has now, until its
	// annotation says so (the record writer's promotedRecord).
	records map[types.UID]placement.Record
	// settled: lost members whose slot an extra took, and when
	// (endLostGang, which may run after the promotion, once per event seen
	// of the member's deletion, leaves their gang alone); kept for
	// settledKept.
	settled map[types.UID]time.Time
}

// settledKept is how long a promotion is remembered: longer than every
// loss timer its member's deletion events may have started (lossSettle,
// and the informer's lag).
const settledKept = time.Minute

func (s *promotions) markSettled(lost types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for uid, at := range s.settled {
		if now.Sub(at) > settledKept {
			delete(s.settled, uid)
		}
	}
	if s.settled == nil {
		s.settled = map[types.UID]time.Time{}
	}
	s.settled[lost] = now
}

// wasSettled reports that an extra took the lost member's slot.
func (s *promotions) wasSettled(lost types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.settled[lost]
	return ok
}

// promoteOnDeletion is podChanged's part when a pod is gone: a member of
// an Allocated gang's minimum that was running gives its slot to an extra
// of its size (the one chosen when its deletion was asked for, else any),
// before its cells are released.
func (p *HiveSched) promoteOnDeletion(logger klog.Logger, pod *v1.Pod) {
	defer p.promos.forgetPromoted(pod.UID)
	group := p.groups.GroupOf(pod)
	if group == "" || podrequest.GangOfExtra(group) != "" || pod.Spec.NodeName == "" || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return
	}
	if st, ok := p.core.AffinityGroupState(group); !ok || st != cellcore.AGAllocated || p.lost.ending(group) != "" || p.binds.retries.GaveUp(group) {
		return
	}
	pr, ok := p.promos.take(pod.UID)
	if !ok {
		pr, ok = p.promotableExtra(group, pod)
	}
	if ok && p.promote(logger, pod, pr) {
		p.promos.markSettled(pod.UID)
	}
}

type promotion struct {
	gang, extra string
	pod         *v1.Pod // the extra's pod
}

func (s *promotions) add(lost types.UID, pr promotion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byLost == nil {
		s.byLost = map[types.UID]promotion{}
	}
	s.byLost[lost] = pr
}

func (s *promotions) take(lost types.UID) (promotion, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr, ok := s.byLost[lost]
	delete(s.byLost, lost)
	return pr, ok
}

// pending: a promotion waits for this pod to go.
func (s *promotions) pending(lost types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.byLost[lost]
	return ok
}

// promotableExtra is a running extra pod of gang of the lost member's size
// that may take its slot (ok false: none).
func (p *HiveSched) promotableExtra(gang string, lost *v1.Pod) (promotion, bool) {
	req, err, ok := p.groups.Cached(lost)
	if !ok || err != nil || req == nil || req.CellLess() {
		return promotion{}, false
	}
	for _, x := range p.core.ExtrasOf(gang) {
		st, ok := p.core.AffinityGroupStatus(x)
		if !ok || st.State != cellcore.AGAllocated || len(st.Pods) != 1 || st.Pods[0].LeafCellNumber != req.LeafCellNumber || !p.core.CanPromote(gang, x) {
			continue
		}
		for _, xp := range p.groups.Pods(x) {
			if xp.Spec.NodeName != "" && xp.DeletionTimestamp == nil && xp.Status.Phase != v1.PodSucceeded && xp.Status.Phase != v1.PodFailed {
				return promotion{gang: gang, extra: x, pod: xp}, true
			}
		}
	}
	return promotion{}, false
}

// promote moves pr's extra into the slot of the lost member (its pod gone):
// the core's PromoteExtra, then the index, the AffinityGroup and the
// extra's placement record follow. false if it could not (the gang then
// ends as any gang that lost a member).
func (p *HiveSched) promote(logger klog.Logger, lost *v1.Pod, pr promotion) bool {
	req, err, ok := p.groups.Cached(lost)
	if !ok || err != nil || req == nil {
		return false
	}
	pp, err := p.core.PromoteExtra(pr.gang, podrequest.PodKey(lost), pr.extra)
	if err != nil {
		logger.V(2).Info("an extra pod could not take a lost member's slot", "gang", pr.gang, "extra", pr.extra, "pod", klog.KObj(lost), "err", err)
		return false
	}
	member := *req // the gang's request, of the member's size (the extra's)
	rec := placement.NewRecord(member.Group, pp, p.groupDowngraded(pr.gang))
	rec.CellLessPods = member.CellLessPods
	if old, err := placement.Decode(pr.pod.Annotations[placement.Annotation]); err == nil {
		rec.Claims = old.Claims
	}
	p.promos.mu.Lock()
	if p.promos.records == nil {
		p.promos.records = map[types.UID]placement.Record{}
	}
	p.promos.records[pr.pod.UID] = rec
	p.promos.mu.Unlock()
	p.ags.Replaced(pr.gang, lost)
	p.ags.Gone(pr.extra, pr.pod, false, true)
	p.groups.TrackRecorded(pr.pod, &member)
	p.ags.Seen(pr.pod, &member)
	p.records.Add(pr.pod)
	p.vcs.Changed()
	msg := fmt.Sprintf("member pod %s of elastic affinity group %s is gone: this extra pod of its size takes its place in the gang's minimum, and the gang runs on", lost.Name, pr.gang)
	p.event(pr.pod, v1.EventTypeNormal, "PromotedToMinimum", msg)
	logger.Info("an extra pod took a lost member's place in its gang's minimum", "gang", pr.gang, "lost", klog.KObj(lost), "extra", klog.KObj(pr.pod))
	return true
}

// promotedRecord is the record writer's promoted: the record of a pod
// promoted from an extra, while its annotation still says extra.
func (p *HiveSched) promotedRecord(pod *v1.Pod, rec placement.Record) (placement.Record, bool) {
	p.promos.mu.Lock()
	defer p.promos.mu.Unlock()
	nr, ok := p.promos.records[pod.UID]
	if !ok {
		return rec, false
	}
	nr.Downgraded = nr.Downgraded || rec.Downgraded
	return nr, true
}

// forgetPromoted drops what is kept of a pod once it is gone.
func (s *promotions) forgetPromoted(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records, uid)
	delete(s.byLost, uid)
}

// rereadExtras: a pod of a gang went (or is going) before the gang was
// placed; its unbound extras, read as extras while the gang's minimum was
// whole, are read again (one may be a member of the minimum now) and sent
// back to the queue. A placed gang's extras stay what they are: a member
// it loses is replaced by promotion, or the gang ends whole.
func (p *HiveSched) rereadExtras(logger klog.Logger, gone *v1.Pod) {
	key, ok := podrequest.GangKeyOf(gone)
	if !ok {
		return
	}
	if req, err, ok := p.groups.Cached(gone); !ok || err != nil || req == nil || req.Group.ExtraOf != "" {
		return // not read as a member of a gang's minimum
	}
	var again map[string]*v1.Pod
	for _, q := range p.groups.GangPods(key) {
		if q.UID == gone.UID || q.Spec.NodeName != "" {
			continue
		}
		req, err, ok := p.groups.Cached(q)
		if !ok || err != nil || req == nil || req.Group.ExtraOf == "" {
			continue
		}
		if st, ok := p.core.AffinityGroupState(req.Group.ExtraOf); ok && st != cellcore.AGPending {
			return // the gang is placed (or preempting for its cells)
		}
		if st, ok := p.core.AffinityGroupState(req.Group.Name); ok && st != cellcore.AGPending {
			continue // the extra holds cells: on its way to its node
		}
		if !p.groups.ReadAgain(q) {
			continue
		}
		if _, err := p.core.DeleteAffinityGroup(req.Group.Name); err != nil {
			logger.Error(err, "dropping an extra pod's waiting group", "group", req.Group.Name)
		}
		p.groups.Track(q)
		if again == nil {
			again = map[string]*v1.Pod{}
		}
		again[q.Namespace+"/"+q.Name] = q
	}
	if len(again) > 0 {
		logger.V(2).Info("a gang lost a pod before it was placed: its extra pods are read again", "pod", klog.KObj(gone), "extras", len(again))
		p.handle.Activate(logger, again)
	}
}
