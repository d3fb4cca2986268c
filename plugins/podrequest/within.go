package podrequest

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Topology constraints written on pods: "the whole gang inside one cell of
// the level this node label key names" (the group's WithinTopologyKey;
// cellcore's within.go places it, and refuses a key no cell type declares,
// or a gang larger than one such cell, with a message the pod's event
// carries). Users write it in the forms they already know:
//
//   - hivesched's own annotation hivesched.io/within-topology (the native
//     form; scheduler-plugins' PodGroups and LeaderWorkerSet groups, whose
//     pods are read through Parse, inherit it);
//   - Kueue's topology-aware scheduling annotations, which jobs put on their
//     pod templates, so that the pods carry them. Kueue's
//     apis/kueue/v1beta2/topology_types.go (v0.17.0 and main,
//     github.com/kubernetes-sigs/kueue) defines
//     kueue.x-k8s.io/podset-required-topology ("requires scheduling all
//     pods on nodes within the same topology domain corresponding to the
//     topology level indicated by the annotation value", a node label key)
//     and kueue.x-k8s.io/podset-preferred-topology (the same "as a
//     preference rather than requirement": if the pod set does not fit one
//     domain of that level, the next level up is tried, and at the top it
//     is admitted spread over several domains); its webhook allows at most
//     one of them (pkg/controller/jobframework/tas_validation.go). With
//     Kueue in front of hivesched its TopologyAwareScheduling feature gate
//     is off (README "Kueue in front"): Kueue then reads neither
//     (pkg/controller/jobs/job/job_controller.go builds the pod set's
//     topology request only with the gate on) and the pods carry them to
//     hivesched untouched;
//   - KAI-Scheduler's kai.scheduler/topology-required-placement ("the
//     maximal level of hierarchy that the job will be scheduled into", a
//     node label key of a level of its Topology CR) and
//     kai.scheduler/topology-preferred-placement (a level it packs the job
//     into as far as it can), both with kai.scheduler/topology, the name of
//     the Topology CR that lists the levels
//     (pkg/podgrouper/podgrouper/plugins/constants/constants.go and
//     docs/topology/README.md, github.com/NVIDIA/KAI-Scheduler). KAI allows
//     a required and a preferred level together (required block, preferred
//     rack). hivesched ignores kai.scheduler/topology: its levels are its
//     own cell types (cellTypes.<type>.topologyKey), not a Topology CR.
//
// Required keys map to WithinTopologyKey; several required annotations on
// one pod must name the same key. Preferred keys are read by nothing: a
// preference must never become a hard constraint (a gang that would wait
// for one domain of it could run spread), and what they ask for is what
// hivesched's buddy allocation does anyway: it packs a gang into the
// lowest cell that holds it whole, and spans cells only when none does.
// HiveD's annotation form takes none of them (it has its own spec).

// Other schedulers' topology annotations.
const (
	// AnnotationKueueRequiredTopology is Kueue's required topology level
	// (a node label key): read as AnnotationWithinTopology.
	AnnotationKueueRequiredTopology = "kueue.x-k8s.io/podset-required-topology"
	// AnnotationKueuePreferredTopology is Kueue's preferred topology
	// level: not a constraint, not read.
	AnnotationKueuePreferredTopology = "kueue.x-k8s.io/podset-preferred-topology"
	// AnnotationKAIRequiredPlacement is KAI-Scheduler's required topology
	// level (a node label key): read as AnnotationWithinTopology.
	AnnotationKAIRequiredPlacement = "kai.scheduler/topology-required-placement"
	// AnnotationKAIPreferredPlacement is KAI-Scheduler's preferred
	// topology level: not a constraint, not read.
	AnnotationKAIPreferredPlacement = "kai.scheduler/topology-preferred-placement"
	// AnnotationKAITopology names KAI-Scheduler's Topology CR, which its
	// placement annotations need: not read (hivesched's levels are its
	// cell types').
	AnnotationKAITopology = "kai.scheduler/topology"
)

// withinAnnotations are the annotations that hold a gang inside one cell of
// a topology level, in the order messages name them.
var withinAnnotations = []string{AnnotationWithinTopology, AnnotationKueueRequiredTopology, AnnotationKAIRequiredPlacement}

// withinTopology is the topology key the pod's annotations require ("" for
// none) and the annotation it was read from; an error if one is empty or
// two name different keys.
func withinTopology(pod *v1.Pod) (key, from string, err error) {
	for _, a := range withinAnnotations {
		raw, ok := pod.Annotations[a]
		if !ok {
			continue
		}
		v := strings.TrimSpace(raw)
		if v == "" {
			return "", "", fmt.Errorf("annotation %s is empty: name the node label key of the topology level the gang must stay inside (one the scheduler's cell types declare as topologyKey, for example topology.kubernetes.io/rack), or drop it", a)
		}
		switch {
		case key == "":
			key, from = v, a
		case v != key:
			return "", "", fmt.Errorf("annotations %s=%q and %s=%q name different topology levels: a gang stays inside one cell of one level; make them name the same node label key, or drop one", from, key, a, v)
		}
	}
	return key, from, nil
}
