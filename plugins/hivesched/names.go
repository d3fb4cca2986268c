package hivesched

import "github.com/hivesched/hivesched/plugins/podrequest"

// The names pods and nodes carry for hivesched, as users, cmd/ and test/
// know them from this package. Each is defined in the package that reads
// or writes it (how a pod asks: podrequest).
const (
	HivedSpecAnnotation           = podrequest.HivedSpecAnnotation
	HivedSchedulingEnableResource = podrequest.HivedSchedulingEnableResource
	LabelVirtualCluster           = podrequest.LabelVirtualCluster
	LabelAffinityGroup            = podrequest.LabelAffinityGroup
	AnnotationGroupMembers        = podrequest.AnnotationGroupMembers
	AnnotationPriority            = podrequest.AnnotationPriority
	AnnotationLeafCellType        = podrequest.AnnotationLeafCellType
	AnnotationPinnedCell          = podrequest.AnnotationPinnedCell
	AnnotationLazyPreemption      = podrequest.AnnotationLazyPreemption
	LabelSpreadKey                = podrequest.LabelSpreadKey
)

const (
	// HivedIsolationAnnotation is written at bind: the pod's leaf cell
	// (device) indices, comma separated, as HiveD writes it.
	HivedIsolationAnnotation = "hivedscheduler.microsoft.com/pod-leaf-cell-isolation"

	// AnnotationPlacement is written at bind: the group and this pod's cells,
	// which a restarted scheduler recovers its state from.
	AnnotationPlacement = "hivesched.io/placement"
	// AnnotationLeafCellIndices is written at bind: the pod's device indices.
	AnnotationLeafCellIndices = "hivesched.io/leaf-cell-indices"
)
