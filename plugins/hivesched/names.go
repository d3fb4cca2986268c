package hivesched

import (
	"github.com/hivesched/hivesched/plugins/devices"
	"github.com/hivesched/hivesched/plugins/placement"
	"github.com/hivesched/hivesched/plugins/podrequest"
)

// The names pods and nodes carry for hivesched, as users, cmd/ and test/
// know them from this package. Each is defined in the package that reads
// or writes it: how a pod asks (podrequest), what it is bound with
// (placement), what a node says of its hardware (devices).
const (
	HivedSpecAnnotation           = podrequest.HivedSpecAnnotation
	HivedSchedulingEnableResource = podrequest.HivedSchedulingEnableResource
	LabelVirtualCluster           = podrequest.LabelVirtualCluster
	LabelAffinityGroup            = podrequest.LabelAffinityGroup
	AnnotationGroupMembers        = podrequest.AnnotationGroupMembers
	AnnotationMaxMembers          = podrequest.AnnotationMaxMembers
	AnnotationExtrasBeyondVC      = podrequest.AnnotationExtrasBeyondVC
	AnnotationPriority            = podrequest.AnnotationPriority
	AnnotationLeafCellType        = podrequest.AnnotationLeafCellType
	AnnotationPinnedCell          = podrequest.AnnotationPinnedCell
	AnnotationLazyPreemption      = podrequest.AnnotationLazyPreemption
	LabelSpreadKey                = podrequest.LabelSpreadKey
	AnnotationWithinTopology      = podrequest.AnnotationWithinTopology

	AnnotationPlacement          = placement.Annotation
	AnnotationPlacementSignature = placement.AnnotationSignature
	AnnotationLeafCellIndices    = placement.AnnotationLeafCellIndices
	HivedIsolationAnnotation     = placement.AnnotationHivedIsolation
	PlacementKeySecret           = placement.KeySecret

	LabelHealth            = devices.LabelHealth
	AnnotationDeviceHealth = devices.AnnotationDeviceHealth

	LabelPodGroup = podrequest.LabelPodGroup

	// Kueue's and KAI-Scheduler's required topology levels, read as
	// AnnotationWithinTopology (podrequest's within.go).
	AnnotationKueueRequiredTopology = podrequest.AnnotationKueueRequiredTopology
	AnnotationKAIRequiredPlacement  = podrequest.AnnotationKAIRequiredPlacement
)
