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

// AffinityGroupPhase is the lifecycle phase of an AffinityGroup, following
// YuniKorn's application states (seeds 001/002). docs/affinitygroups.md maps
// them to HiveD's affinity group states (Status.State).
type AffinityGroupPhase string

const (
	// AffinityGroupNew: the group is known (its object or its first pod
	// exists) and has not been admitted yet.
	AffinityGroupNew AffinityGroupPhase = "New"
	// AffinityGroupAccepted: admitted by its VC and part of scheduling; no
	// member is bound yet (HiveD state Pending or Preempting).
	AffinityGroupAccepted AffinityGroupPhase = "Accepted"
	// AffinityGroupStarting: cells allocated, some but not all members bound.
	AffinityGroupStarting AffinityGroupPhase = "Starting"
	// AffinityGroupRunning: every member bound.
	AffinityGroupRunning AffinityGroupPhase = "Running"
	// AffinityGroupCompleting: members finished successfully, others still run.
	AffinityGroupCompleting AffinityGroupPhase = "Completing"
	// AffinityGroupCompleted: every member finished successfully (or is gone
	// after its group finished); the cells are free.
	AffinityGroupCompleted AffinityGroupPhase = "Completed"
	// AffinityGroupFailing: the group failed (a member failed, it was
	// preempted, it timed out pending) and still has pods or cells.
	AffinityGroupFailing AffinityGroupPhase = "Failing"
	// AffinityGroupFailed: the group failed and holds nothing any more.
	AffinityGroupFailed AffinityGroupPhase = "Failed"
	// AffinityGroupRejected: the group cannot be scheduled as asked (its VC
	// refuses its namespace, the request is invalid).
	AffinityGroupRejected AffinityGroupPhase = "Rejected"
	// AffinityGroupExpired: a Completed, Failed or Rejected group kept for
	// the retention time; the scheduler stops tracking it (and deletes the
	// objects it created itself).
	AffinityGroupExpired AffinityGroupPhase = "Expired"
)

// LabelManagedBy marks AffinityGroups the scheduler created for a gang it
// saw (the implicit form), with value ManagedByHivesched.
const (
	LabelManagedBy     = "app.kubernetes.io/managed-by"
	ManagedByHivesched = "hivesched"
)

// Condition types of AffinityGroupStatus.Conditions.
const (
	// ConditionScheduled is True once the group holds its cells.
	ConditionScheduled = "Scheduled"
	// ConditionDowngraded is True while the group runs as opportunistic
	// after a lazy preemption (or its VC shrank).
	ConditionDowngraded = "Downgraded"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=ag,categories=hivesched
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="VC",type=string,JSONPath=`.spec.virtualCluster`,description="Virtual cluster"
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`,description="HiveD priority: -1 opportunistic, 0..1000 guaranteed"
// +kubebuilder:printcolumn:name="Members",type=string,JSONPath=`.status.membersSummary`,description="Bound of all member pods"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`,description="HiveD affinity group state"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// AffinityGroup is a gang: pods placed all or nothing in a virtual cluster.
// Users create one and label its pods hivesched.io/affinity-group=<name>
// (the explicit form), or the scheduler creates one for every gang it sees
// (the implicit form, labelled app.kubernetes.io/managed-by=hivesched).
type AffinityGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the group asks for.
	// +optional
	Spec AffinityGroupSpec `json:"spec,omitempty"`

	// Status is the group as the scheduler sees it.
	// +optional
	Status AffinityGroupStatus `json:"status,omitempty"`
}

// AffinityGroupSpec is a gang's request, as HiveD's affinityGroup names it.
type AffinityGroupSpec struct {
	// VirtualCluster is the VC the group runs in.
	// +kubebuilder:validation:MinLength=1
	VirtualCluster string `json:"virtualCluster"`

	// Priority is -1 (opportunistic) or 0..1000 (guaranteed). Defaults to 0.
	// +optional
	// +kubebuilder:validation:Minimum=-1
	// +kubebuilder:validation:Maximum=1000
	Priority *int32 `json:"priority,omitempty"`

	// Members are the group's pods: PodNumber pods of LeafCellNumber leaf
	// cells each. Each pod requests its leaf cells (nvidia.com/gpu).
	// +kubebuilder:validation:MinItems=1
	// +listType=atomic
	Members []AffinityGroupMember `json:"members"`

	// LeafCellType restricts the group to one leaf cell type (GPU model).
	// +optional
	LeafCellType string `json:"leafCellType,omitempty"`

	// PinnedCell places the group in a pinned cell of its VC.
	// +optional
	PinnedCell string `json:"pinnedCell,omitempty"`

	// LazyPreemption: when preempted, run on as opportunistic instead of
	// being deleted.
	// +optional
	LazyPreemption bool `json:"lazyPreemption,omitempty"`

	// WithinTopologyKey holds all the group's pods to one domain of a node
	// label key: the group is placed under one cell of the level whose
	// cell type the scheduler's args name by this key (cellTypes'
	// topologyKey; a node-level type answers to kubernetes.io/hostname).
	// A Workload API PodGroup's topology constraint is read into it.
	// +optional
	WithinTopologyKey string `json:"withinTopologyKey,omitempty"`

	// PendingTimeoutSeconds overrides the VC's: a group pending longer goes
	// Failed (reason PendingTimeout). 0 means no timeout.
	// +optional
	// +kubebuilder:validation:Minimum=0
	PendingTimeoutSeconds *int32 `json:"pendingTimeoutSeconds,omitempty"`
}

// AffinityGroupMember is PodNumber pods of LeafCellNumber leaf cells. A
// member of 0 leaf cells asks for no GPU (an MPI launcher, a Ray head): it
// is placed and bound with the gang and holds no cells.
type AffinityGroupMember struct {
	// +kubebuilder:validation:Minimum=1
	PodNumber int32 `json:"podNumber"`
	// +kubebuilder:validation:Minimum=0
	LeafCellNumber int32 `json:"leafCellNumber"`
}

// AffinityGroupStatus is written by the scheduler only.
type AffinityGroupStatus struct {
	// Phase is the lifecycle phase (YuniKorn's application states).
	// +optional
	Phase AffinityGroupPhase `json:"phase,omitempty"`

	// State is HiveD's affinity group state: Pending, Preempting,
	// Allocated, Being preempted (Deleted once the group holds nothing).
	// +optional
	State string `json:"state,omitempty"`

	// Reason is a CamelCase word for the phase or the wait (Waiting,
	// Preempting, PendingTimeout, Preempted, VirtualClusterRefused, ...).
	// +optional
	Reason string `json:"reason,omitempty"`

	// Message says in one sentence what the group waits for or why it
	// ended.
	// +optional
	Message string `json:"message,omitempty"`

	// Members counts the member pods.
	// +optional
	Members AffinityGroupMemberCounts `json:"members"`

	// MembersSummary is "bound/total", the MEMBERS column.
	// +optional
	MembersSummary string `json:"membersSummary,omitempty"`

	// Pods are the member pods with their placement.
	// +optional
	// +listType=map
	// +listMapKey=name
	Pods []AffinityGroupPodStatus `json:"pods,omitempty"`

	// Preempting names the groups whose cells this group takes.
	// +optional
	// +listType=atomic
	Preempting []string `json:"preempting,omitempty"`

	// PreemptedBy names the group that preempted this one.
	// +optional
	PreemptedBy string `json:"preemptedBy,omitempty"`

	// AdmittedTime: the group was admitted (Accepted).
	// +optional
	AdmittedTime *metav1.Time `json:"admittedTime,omitempty"`
	// FirstBoundTime: its first member was bound.
	// +optional
	FirstBoundTime *metav1.Time `json:"firstBoundTime,omitempty"`
	// RunningTime: every member was bound.
	// +optional
	RunningTime *metav1.Time `json:"runningTime,omitempty"`
	// FinishedTime: it reached Completed, Failed or Rejected.
	// +optional
	FinishedTime *metav1.Time `json:"finishedTime,omitempty"`

	// Conditions: Scheduled, Downgraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AffinityGroupMemberCounts counts a group's member pods.
type AffinityGroupMemberCounts struct {
	// Total is the number of member pods the group asks for.
	// +optional
	Total int32 `json:"total"`
	// Bound members have a node.
	// +optional
	Bound int32 `json:"bound"`
	// Running members run.
	// +optional
	Running int32 `json:"running"`
	// Succeeded members finished successfully.
	// +optional
	Succeeded int32 `json:"succeeded"`
	// Failed members failed.
	// +optional
	Failed int32 `json:"failed"`
}

// AffinityGroupPodStatus is one member pod and its cells.
type AffinityGroupPodStatus struct {
	// Name of the pod.
	Name string `json:"name"`
	// Node it is placed on.
	// +optional
	Node string `json:"node,omitempty"`
	// LeafCellIndices are its device indices on the node.
	// +optional
	// +listType=atomic
	LeafCellIndices []int32 `json:"leafCellIndices,omitempty"`
	// LeafCellType of its cells.
	// +optional
	LeafCellType string `json:"leafCellType,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// AffinityGroupList is a list of AffinityGroups.
type AffinityGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []AffinityGroup `json:"items"`
}
