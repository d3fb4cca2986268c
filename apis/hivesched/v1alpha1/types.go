/*
Copyright The hivesched Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AllNamespaces is the Spec.AllowedNamespaces entry that admits pods from
// every namespace.
const AllNamespaces = "*"

// AnnotationHivedName is set on a VirtualCluster converted from a HiveD
// configuration (cmd/hived-convert) whose HiveD name is not a Kubernetes
// name: the HiveD name, e.g. "VC1" on VirtualCluster "vc1".
const AnnotationHivedName = "hivesched.io/hived-name"

// VirtualClusterState is the lifecycle state of a VirtualCluster. The desired
// state is set in Spec.State; the observed one is reported in Status.State.
// The states are modelled on YuniKorn queue states.
type VirtualClusterState string

const (
	// VirtualClusterActive admits new affinity groups. It is the default; an
	// empty Spec.State means Active.
	VirtualClusterActive VirtualClusterState = "Active"
	// VirtualClusterDraining admits no new affinity groups; groups that are
	// already allocated keep running (and may still be preempted).
	VirtualClusterDraining VirtualClusterState = "Draining"
	// VirtualClusterStopped admits no new affinity groups. It is used to
	// decommission a virtual cluster: once no group is left the VC holds no
	// cells and can be deleted.
	VirtualClusterStopped VirtualClusterState = "Stopped"
	// VirtualClusterRejected is only reported in Status.State: the scheduler
	// refused the spec (for example, the physical cluster cannot host the
	// requested cells, or a pinned cell is unknown or already taken).
	VirtualClusterRejected VirtualClusterState = "Rejected"
)

// Condition types reported in VirtualClusterStatus.Conditions.
const (
	// ConditionAdmitted is True when the scheduler accepted the spec and the
	// virtual cells are part of the cell model.
	ConditionAdmitted = "Admitted"
	// ConditionRejected is True when the scheduler refused the spec; the
	// condition message explains why.
	ConditionRejected = "Rejected"
	// ConditionCellsLost is True when some leaf cells under the VC's cells
	// are lost: on unhealthy hardware (a bad, maintenance or retired node or
	// device) or held by pods hivesched did not place. The message names
	// the nodes and the pods.
	ConditionCellsLost = "CellsLost"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=vc,categories=hivesched
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Cells",type=string,priority=1,JSONPath=`.status.cellsSummary`,description="Virtual cells of the VC, e.g. 4xV100-NODE,pinned:rack0-node0 (kubectl get vc -o wide)"
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.totalLeafCells`,description="Leaf cells (e.g. GPUs) of the VC"
// +kubebuilder:printcolumn:name="Used",type=integer,JSONPath=`.status.usedLeafCells`,description="Leaf cells used (or reserved) by the VC's guaranteed groups"
// +kubebuilder:printcolumn:name="Free",type=integer,JSONPath=`.status.freeLeafCells`,description="Leaf cells of the VC that are free and healthy"
// +kubebuilder:printcolumn:name="Lent",type=integer,JSONPath=`.status.lentLeafCells`,description="Healthy leaf cells of the VC that opportunistic groups use (another VC's, or its own); Total = Used + Free + Lent + Unavailable"
// +kubebuilder:printcolumn:name="Unavailable",type=integer,JSONPath=`.status.unavailableLeafCells`,description="Leaf cells of the VC on lost or not yet healthy hardware, or held by pods hivesched did not place"
// +kubebuilder:printcolumn:name="Opp",type=integer,JSONPath=`.status.opportunisticLeafCells`,description="Leaf cells used by the VC's opportunistic groups (priority -1 or lazily preempted), outside its guarantee"
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.affinityGroups.pending`,description="Pending affinity groups"
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// VirtualCluster is a HiveD virtual cluster: a guaranteed quota of cells of
// given types (and optionally specific pinned physical cells) that pods of the
// allowed namespaces can use. It is cluster-scoped; its name is the VC name
// that pods refer to.
type VirtualCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired virtual cluster.
	// +optional
	Spec VirtualClusterSpec `json:"spec,omitempty"`

	// Status is the virtual cluster as observed by the scheduler.
	// +optional
	Status VirtualClusterStatus `json:"status,omitempty"`
}

// VirtualClusterSpec is the desired state of a VirtualCluster. Field names
// follow HiveD's virtualClusters configuration.
type VirtualClusterSpec struct {
	// VirtualCells are the non-pinned cells guaranteed to this VC, each as a
	// cell type and a count.
	// +optional
	// +listType=atomic
	VirtualCells []VirtualCellSpec `json:"virtualCells,omitempty"`

	// PinnedCells are specific physical cells (by their pinnedCellId in the
	// physical cluster configuration) reserved for this VC.
	// +optional
	// +listType=map
	// +listMapKey=pinnedCellId
	PinnedCells []PinnedCellSpec `json:"pinnedCells,omitempty"`

	// AllowedNamespaces lists the namespaces whose pods may use this VC.
	// The entry "*" allows every namespace. An empty or absent list allows
	// no namespace at all (the VC then only reserves capacity), so access
	// must always be granted explicitly.
	// +optional
	// +listType=set
	AllowedNamespaces []string `json:"allowedNamespaces,omitempty"`

	// State is the desired lifecycle state: Active (the default; an empty
	// value is treated as Active), Draining (no new affinity groups are
	// admitted, running ones continue) or Stopped (no new affinity groups,
	// used to decommission the VC).
	// +optional
	// +kubebuilder:default=Active
	// +kubebuilder:validation:Enum=Active;Draining;Stopped
	State VirtualClusterState `json:"state,omitempty"`

	// Sequencer orders the VC's pending affinity groups of equal priority
	// (seed 004's sequencers): PriorityFIFO (the default: oldest first),
	// PriorityLIFO (newest first) or DRF (the namespace with the smallest
	// dominant share of the VC first, FIFO inside a namespace). Higher
	// priority always goes first.
	// +optional
	// +kubebuilder:default=PriorityFIFO
	// +kubebuilder:validation:Enum=PriorityFIFO;PriorityLIFO;DRF
	Sequencer Sequencer `json:"sequencer,omitempty"`

	// Selector chooses among the placements the buddy cell allocation
	// allows (seed 004's agent selectors): Pack (the default: HiveD's
	// packing into the busiest cells that fit), Spread (members of a group,
	// and groups that share a hivesched.io/spread-key, on different nodes,
	// then different racks, as far as the VC's cells allow) or RoundRobin
	// (rotate among equally good cells).
	// +optional
	// +kubebuilder:default=Pack
	// +kubebuilder:validation:Enum=Pack;Spread;RoundRobin
	Selector Selector `json:"selector,omitempty"`

	// Limits bound what each namespace may use of the VC (seed 004's
	// validators). The entry with namespace "*" applies to every namespace
	// that has no entry of its own. Without an entry a namespace is bounded
	// only by the VC's cells and may use every priority.
	// +optional
	// +listType=map
	// +listMapKey=namespace
	Limits []NamespaceLimits `json:"limits,omitempty"`

	// PendingTimeoutSeconds: an affinity group of this VC that stays
	// pending longer (from its admission) goes Failed with reason
	// PendingTimeout (seed 004); its pods get an event and are no longer
	// scheduled. An AffinityGroup's spec.pendingTimeoutSeconds overrides
	// it. Absent or 0: no timeout.
	// +optional
	// +kubebuilder:validation:Minimum=0
	PendingTimeoutSeconds *int32 `json:"pendingTimeoutSeconds,omitempty"`

	// DeletePodsOnPendingTimeout: the pods of a group that timed out are
	// deleted. Otherwise (the default) they are left to their owner (a
	// Job's controller sees them pending and decides).
	// +optional
	DeletePodsOnPendingTimeout bool `json:"deletePodsOnPendingTimeout,omitempty"`
}

// Sequencer is how a VC orders its pending affinity groups.
type Sequencer string

const (
	SequencerPriorityFIFO Sequencer = "PriorityFIFO"
	SequencerPriorityLIFO Sequencer = "PriorityLIFO"
	SequencerDRF          Sequencer = "DRF"
)

// Selector is how a VC chooses among the placements the buddy allocation
// allows.
type Selector string

const (
	SelectorPack       Selector = "Pack"
	SelectorSpread     Selector = "Spread"
	SelectorRoundRobin Selector = "RoundRobin"
)

// NamespaceLimits bounds one namespace's use of a VC. An absent field is no
// bound.
type NamespaceLimits struct {
	// Namespace the limits apply to, or "*" for every namespace without an
	// entry of its own.
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`

	// MaxLeafCells is the most leaf cells (e.g. GPUs) the namespace's
	// affinity groups of this VC may hold at once (running, being
	// preempted, or reserved while preempting). A group that would go over
	// waits, with a reason naming the limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxLeafCells *int32 `json:"maxLeafCells,omitempty"`

	// MaxRunningGroups is the most affinity groups of the namespace that may
	// hold cells of this VC at once. A group that would go over waits.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxRunningGroups *int32 `json:"maxRunningGroups,omitempty"`

	// MaxGroupLeafCells is the most leaf cells one affinity group of the
	// namespace may ask for in all. A larger group is refused (an event on
	// its pods).
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxGroupLeafCells *int32 `json:"maxGroupLeafCells,omitempty"`

	// MaxPriority is the highest priority (-1 opportunistic .. 1000) the
	// namespace's groups may ask for in this VC. A group asking for more is
	// refused (an event on its pods).
	// +optional
	// +kubebuilder:validation:Minimum=-1
	// +kubebuilder:validation:Maximum=1000
	MaxPriority *int32 `json:"maxPriority,omitempty"`
}

// VirtualCellSpec requests CellNumber cells of type CellType.
type VirtualCellSpec struct {
	// CellType is a cell type of the physical cluster (e.g. "V100-NODE"), or a
	// HiveD dotted path from a top-level cell type down to the wanted type
	// (e.g. "V100-RACK.V100-NODE").
	// +kubebuilder:validation:MinLength=1
	CellType string `json:"cellType"`

	// CellNumber is the number of cells of CellType.
	// +kubebuilder:validation:Minimum=0
	CellNumber int32 `json:"cellNumber"`
}

// PinnedCellSpec reserves one physical cell for the VC.
type PinnedCellSpec struct {
	// PinnedCellID is the pinnedCellId of a physical cell in the scheduler's
	// physical cluster configuration.
	// +kubebuilder:validation:MinLength=1
	PinnedCellID string `json:"pinnedCellId"`
}

// VirtualClusterStatus is the state of a VirtualCluster as observed by the
// scheduler.
type VirtualClusterStatus struct {
	// State is the observed lifecycle state: Active, Draining, Stopped, or
	// Rejected when the scheduler refused the spec.
	// +optional
	State VirtualClusterState `json:"state,omitempty"`

	// ObservedGeneration is the metadata.generation the status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are the latest observations (types Admitted, Rejected and
	// CellsLost).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// CellsSummary is a short human-readable summary of the virtual cells,
	// e.g. "4xV100-NODE,pinned:rack0-node0" (after two pinned cells the
	// others are counted: "pinned:a,b,+3"); shown in the CELLS printer column.
	// +optional
	CellsSummary string `json:"cellsSummary,omitempty"`

	// Cells reports usage per cell type of the VC.
	// +optional
	// +listType=map
	// +listMapKey=cellType
	Cells []CellTypeStatus `json:"cells,omitempty"`

	// AffinityGroups counts the VC's affinity groups (gangs) by state.
	// +optional
	AffinityGroups AffinityGroupCounts `json:"affinityGroups"`

	// TotalLeafCells is the number of leaf cells (e.g. GPUs) in the VC.
	// +optional
	TotalLeafCells int32 `json:"totalLeafCells"`

	// UsedLeafCells is the number of the VC's leaf cells allocated to (or
	// reserved for) its guaranteed affinity groups.
	// +optional
	UsedLeafCells int32 `json:"usedLeafCells"`

	// FreeLeafCells is the number of the VC's leaf cells that are free and
	// healthy: in its bound cells, and every leaf cell of its virtual cells
	// not bound yet. TotalLeafCells - UsedLeafCells - FreeLeafCells are
	// LentLeafCells and UnavailableLeafCells.
	// +optional
	FreeLeafCells int32 `json:"freeLeafCells"`

	// OpportunisticGroups is the number of the VC's running affinity groups
	// that are opportunistic: priority -1, or guaranteed groups downgraded
	// (see DowngradedGroups). They use idle cells anywhere in the cluster,
	// outside the VC's guarantee, and any guaranteed group may preempt them.
	// +optional
	OpportunisticGroups int32 `json:"opportunisticGroups"`

	// DowngradedGroups is how many of the OpportunisticGroups were
	// guaranteed and were downgraded: lazily preempted by a higher-priority
	// group of the VC (lazyPreemptionEnable), or displaced when the VC
	// shrank. Their pods carry a LazilyPreempted event.
	// +optional
	DowngradedGroups int32 `json:"downgradedGroups"`

	// OpportunisticLeafCells is the number of leaf cells the
	// OpportunisticGroups use, wherever they run.
	// +optional
	OpportunisticLeafCells int32 `json:"opportunisticLeafCells"`

	// LostLeafCells is the number of the VC's leaf cells that are lost: on
	// unhealthy hardware or held by pods hivesched did not place (see the
	// CellsLost condition). The VC keeps them bound so that it sees its
	// loss rather than another VC losing a promised cell.
	// +optional
	LostLeafCells int32 `json:"lostLeafCells"`

	// ForeignLeafCells is how many of the LostLeafCells pods hivesched did
	// not place hold (another scheduler's pods, or pods created with
	// spec.nodeName, that request the leaf cell resource).
	// +optional
	ForeignLeafCells int32 `json:"foreignLeafCells"`

	// LentLeafCells is the number of the VC's healthy leaf cells, neither
	// used by its guaranteed groups nor free, that opportunistic groups use
	// (another VC's, or its own outside its guarantee): lent, and taken back
	// by preemption when the VC needs them.
	// +optional
	LentLeafCells int32 `json:"lentLeafCells"`

	// UnavailableLeafCells is the number of the VC's leaf cells that are
	// neither used by its guaranteed groups, free nor lent: on lost
	// hardware, held by pods hivesched did not place, or on hardware of
	// unknown health. TotalLeafCells = UsedLeafCells + FreeLeafCells +
	// LentLeafCells + UnavailableLeafCells.
	// +optional
	UnavailableLeafCells int32 `json:"unavailableLeafCells"`
}

// CellTypeStatus reports the virtual cells of one cell type.
type CellTypeStatus struct {
	// CellType is the cell type (or dotted path) as given in the spec, or the
	// pinned cell id prefixed with "pinned:" for pinned cells.
	CellType string `json:"cellType"`

	// Level is the level of the cell type in the physical hierarchy
	// (1 = leaf cell).
	// +optional
	Level int32 `json:"level,omitempty"`

	// TotalCells is the number of virtual cells of this type in the VC.
	TotalCells int32 `json:"totalCells"`

	// BoundCells is the number of those virtual cells currently bound to a
	// physical cell.
	// +optional
	BoundCells int32 `json:"boundCells"`

	// BadCells is the number of those virtual cells that are bound to (or can
	// only be bound to) unhealthy physical cells.
	// +optional
	BadCells int32 `json:"badCells"`

	// UsedLeafCells is the number of leaf cells under these virtual cells
	// that are allocated to affinity groups.
	// +optional
	UsedLeafCells int32 `json:"usedLeafCells"`

	// FreeLeafCells is the number of leaf cells under these virtual cells
	// that are free.
	// +optional
	FreeLeafCells int32 `json:"freeLeafCells"`
}

// AffinityGroupCounts counts affinity groups of a VC by state (HiveD's
// affinity group states).
type AffinityGroupCounts struct {
	// Pending groups wait for cells (gang not yet placeable or waiting in Permit).
	// +optional
	Pending int32 `json:"pending"`
	// Preempting groups have triggered preemption and wait for victims to go.
	// +optional
	Preempting int32 `json:"preempting"`
	// Allocated groups hold their cells.
	// +optional
	Allocated int32 `json:"allocated"`
	// BeingPreempted groups are being evicted by higher-priority groups.
	// +optional
	BeingPreempted int32 `json:"beingPreempted"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// VirtualClusterList is a list of VirtualClusters.
type VirtualClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []VirtualCluster `json:"items"`
}
