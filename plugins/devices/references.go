package devices

import (
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/hivesched/hivesched/plugins/placement"
)

// Pods that name devices without requesting them (issue 28, finding 3).
// hivesched writes a pod's device indices at bind (placement's
// AnnotationLeafCellIndices, and HiveD's isolation annotation for a pod in
// HiveD's form), and the samples hand them to the containers through the
// downward API. A pod that carries one of them but that hivesched did not
// place (one created with them by an identity the admission policy
// exempts, or before the policy was installed; one whose placement record
// is not trusted) and that requests none of the leaf resource runs on
// those devices all the same, but counted 0 foreign devices: hivesched
// placed other pods on them. Those devices are taken, by index.
//
// NVIDIA_VISIBLE_DEVICES written literally in a container's env is not
// read: the node's setting decides whether it means anything (docs/
// security.md, "The device hand-off is not a boundary"); no admission
// policy keeps it from a tenant's spec.nodeName pod, so counting it would
// let any tenant take any node's devices away from every VC; and the
// node's GPU daemons (device plugin, monitoring) set it to "all".

// Taken is what a pod the core does not hold takes on its node.
type Taken struct {
	// Devices: how many, not which (its request of the leaf resource).
	Devices int32
	// Indices: which, for a pod that requests none but names devices
	// (above): the distinct device indices of its node it names,
	// sorted; Via, the annotations that named them; Ignored, how many
	// entries named no device of the node.
	Indices []int32
	Via     []string
	Ignored int
}

// None: the pod takes nothing.
func (t Taken) None() bool { return t.Devices <= 0 && len(t.Indices) == 0 }

// referenceAnnotations are the annotations that name a pod's devices, in
// the order they are read.
var referenceAnnotations = []string{placement.AnnotationLeafCellIndices, placement.AnnotationHivedIsolation}

// referencesDevices: the pod carries an annotation that names devices
// (a map look-up per annotation: the check before anything is parsed).
func referencesDevices(pod *v1.Pod) bool {
	for _, k := range referenceAnnotations {
		if _, ok := pod.Annotations[k]; ok {
			return true
		}
	}
	return false
}

// referencedIndices reads the devices of a node that the pod's annotations
// name: the distinct indices (sorted) that are devices of the node (of: its
// indices, sorted), the annotations that named them, and how many entries
// named nothing of the node (not a number, not one of its devices). At most
// one pass over each annotation, and nothing allocated beyond the node's
// devices, however long the list.
func referencedIndices(pod *v1.Pod, of []int32) (idx []int32, via []string, ignored int) {
	named := make([]bool, len(of))
	for _, key := range referenceAnnotations {
		s, ok := pod.Annotations[key]
		if !ok {
			continue
		}
		found := false
		for s != "" {
			var e string
			e, s, _ = strings.Cut(s, ",")
			e = strings.TrimSpace(e)
			if e == "" {
				continue
			}
			i, err := strconv.ParseInt(e, 10, 32)
			at, isDevice := 0, false
			if err == nil {
				at, isDevice = slices.BinarySearch(of, int32(i))
			}
			if !isDevice {
				ignored++
				continue
			}
			named[at], found = true, true
		}
		if found {
			via = append(via, key)
		}
	}
	for at, n := range named {
		if n {
			idx = append(idx, of[at])
		}
	}
	return idx, via, ignored
}
