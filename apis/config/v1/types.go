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

package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The bind gate's modes (HiveSchedArgs.BindGate).
const (
	// BindGateAdaptive: the limit follows the binding calls' latency
	// between MinBindingPods and MaxBindingPods.
	BindGateAdaptive = "Adaptive"
	// BindGateFixed: the limit is MaxBindingPods.
	BindGateFixed = "Fixed"
)

// Where the physical cluster comes from (HiveSchedArgs.PhysicalClusterFrom).
const (
	// PhysicalClusterFromConfig: physicalCluster, written by hand.
	PhysicalClusterFromConfig = "Config"
	// PhysicalClusterFromResourceSlices: derived from the Nodes and the DRA
	// driver's ResourceSlices.
	PhysicalClusterFromResourceSlices = "ResourceSlices"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// HiveSchedArgs are the arguments of the HiveSched plugin, given in
// KubeSchedulerConfiguration.profiles[].pluginConfig[] under the name
// "HiveSched". JSON field names follow HiveD's configuration.
type HiveSchedArgs struct {
	metav1.TypeMeta `json:",inline"`

	// PhysicalCluster describes the cell types and the physical cells.
	// Required with physicalClusterFrom Config, forbidden with
	// ResourceSlices.
	// +optional
	PhysicalCluster PhysicalClusterSpec `json:"physicalCluster"`

	// PhysicalClusterFrom says where the physical cluster comes from:
	// "Config" (physicalCluster) or "ResourceSlices": derived when the
	// scheduler starts from the Nodes and the ResourceSlices of dra.driver
	// (leaf cells the driver's whole GPUs, typed by their productName,
	// grouped by PCIe root, node, and sliceTopology.nodeGroupLabels;
	// docs/dra.md, "Topology from ResourceSlices"). Defaults to "Config".
	// +optional
	PhysicalClusterFrom *string `json:"physicalClusterFrom,omitempty"`

	// SliceTopology shapes the physical cluster derived from
	// ResourceSlices; only with physicalClusterFrom ResourceSlices.
	// +optional
	SliceTopology *SliceTopologyArgs `json:"sliceTopology,omitempty"`

	// PermitWaitingTimeSeconds is how long Permit waits for the whole gang
	// (affinity group). Defaults to 60.
	// +optional
	PermitWaitingTimeSeconds *int64 `json:"permitWaitingTimeSeconds,omitempty"`

	// StatusUpdateIntervalSeconds is the minimum interval between two status
	// writes of the same VirtualCluster. Defaults to 5.
	// +optional
	StatusUpdateIntervalSeconds *int64 `json:"statusUpdateIntervalSeconds,omitempty"`

	// VictimGracePeriodSeconds caps the grace period a preempted pod is
	// deleted with (its own terminationGracePeriodSeconds when shorter):
	// the preemptor's cells stay Reserving until the victims are gone, so
	// a tenant's year-long grace period must not decide how long another
	// job waits. Defaults to 30; 0 deletes victims at once; at most 3600.
	// +optional
	VictimGracePeriodSeconds *int64 `json:"victimGracePeriodSeconds,omitempty"`

	// MaxBindingPods is how many of HiveSched's pods may have their binding
	// API call in flight at once: with BindGate Fixed the limit, with
	// Adaptive the ceiling the limit moves under. Whole gangs are let
	// through, in the order they passed Permit, while their members fit (a
	// gang larger than the limit goes alone): a gang's bindings then reach
	// an API server that is not flooded, and its members are bound together
	// instead of seconds apart. Defaults to 128 with BindGate Adaptive and
	// to 16 with Fixed; 0 means no limit (every pod binds as soon as Permit
	// lets it go, as the framework does), whatever BindGate says; at most
	// 10000.
	// +optional
	MaxBindingPods *int32 `json:"maxBindingPods,omitempty"`

	// BindGate is how the bind gate's limit is chosen: "Adaptive" (the
	// limit follows the binding calls' latency, between MinBindingPods and
	// MaxBindingPods: it grows while the calls come back as fast as
	// before and a gang's calls close together, and is cut when they slow
	// down or a gang's calls return apart) or "Fixed" (MaxBindingPods).
	// Defaults to Adaptive, except when MaxBindingPods is set and BindGate
	// is not: then Fixed, as before BindGate existed.
	// +optional
	BindGate *string `json:"bindGate,omitempty"`

	// MinBindingPods is the adaptive limit's floor (BindGate Adaptive;
	// clamped to MaxBindingPods). Defaults to 8; from 1 to 10000.
	// +optional
	MinBindingPods *int32 `json:"minBindingPods,omitempty"`

	// MaxBindAttempts bounds how often a member of an affinity group is
	// bound before the scheduler gives up on the group's placement. A
	// member whose binding API call fails is retried on the same cells
	// after the framework's backoff (the group keeps its allocation, so no
	// other group takes them meanwhile); after MaxBindAttempts failures in
	// a row the group goes back to Pending with a BindFailed event and is
	// placed again. Members already bound are then deleted (their owner
	// creates them again): a gang is never left partly bound. Defaults to
	// 3; from 1 to 100.
	// +optional
	MaxBindAttempts *int32 `json:"maxBindAttempts,omitempty"`

	// InspectBindAddress is where the read-only inspect API listens (plain
	// HTTP, host:port; apis/inspect/v1). Defaults to 127.0.0.1:10262: on
	// the scheduler's own host only. Set "" to disable it, or ":10262" to
	// reach it through a Service and the API server's service proxy
	// (docs/inspect.md says how access is restricted).
	// +optional
	InspectBindAddress *string `json:"inspectBindAddress,omitempty"`

	// LeafCellResourceName is the extended resource that leaf cells are
	// counted in. Defaults to "nvidia.com/gpu".
	// +optional
	LeafCellResourceName *string `json:"leafCellResourceName,omitempty"`

	// AffinityGroupStatus: the scheduler creates an AffinityGroup object for
	// every gang it sees and writes the status of every AffinityGroup
	// (docs/affinitygroups.md). Defaults to true. With false the explicit
	// form still works (pods read their group's spec from its
	// AffinityGroup) but nothing is created or written.
	// +optional
	AffinityGroupStatus *bool `json:"affinityGroupStatus,omitempty"`

	// AffinityGroupRetentionSeconds is how long a Completed, Failed or
	// Rejected AffinityGroup is kept before it Expires; the scheduler then
	// deletes the AffinityGroups it created itself (those owned by a Job
	// go with the Job anyway). Defaults to 600.
	// +optional
	AffinityGroupRetentionSeconds *int64 `json:"affinityGroupRetentionSeconds,omitempty"`

	// DRA says which ResourceClaims hivesched allocates itself and whose
	// devices its leaf cells are (docs/plugin.md, "DRA").
	// +optional
	DRA *DRAArgs `json:"dra,omitempty"`
}

// DRAArgs configures Dynamic Resource Allocation of GPU claims.
type DRAArgs struct {
	// GPUDeviceClasses: a ResourceClaim (or the claim of a
	// ResourceClaimTemplate) with a request of one of these DeviceClasses
	// is a GPU claim. hivesched allocates it, with exactly the devices of
	// the leaf cells it decided for the pod; the profile's DynamicResources
	// (wrapped by HiveSchedDRA) never sees it. Defaults to
	// ["gpu.nvidia.com"], the class NVIDIA's DRA driver installs; [] turns
	// GPU claims off (such pods are then refused).
	// +optional
	GPUDeviceClasses []string `json:"gpuDeviceClasses,omitempty"`

	// Driver is the DRA driver whose devices are the leaf cells: leaf cell
	// i of a node is the device of the node's ResourceSlice pool of this
	// driver whose name ends in the number i (NVIDIA publishes gpu-<minor>,
	// pool = node name). Defaults to "gpu.nvidia.com".
	// +optional
	Driver *string `json:"driver,omitempty"`
}

// SliceTopologyArgs shape the physical cluster derived from ResourceSlices.
type SliceTopologyArgs struct {
	// NodeGroupLabels are node label keys, inner level first (e.g.
	// [nvidia.com/gpu.clique, topology.kubernetes.io/rack]). Each makes one
	// level of cells above the node: the cells below whose nodes share the
	// label's value (and are of one type) are one cell, whose type is
	// named "<child type>-<level><count>", the level being the key's name
	// after its last '.' (rack, clique), and whose topologyKey is the key.
	// A node without the label is not grouped at that level.
	// +optional
	NodeGroupLabels []string `json:"nodeGroupLabels,omitempty"`

	// NodeGroupSizes are the number of cells a complete group of a label
	// of NodeGroupLabels holds (nvidia.com/gpu.clique: 18, the compute
	// trays of an NVL72 domain). A group with fewer (a tray out for repair,
	// a rack partly delivered) is still a cell of the complete type: the
	// missing cells are absent nodes, lost capacity as a deleted node's,
	// so that a VC that owns the domain keeps owning it and sees what it
	// is short of (docs/nvlink.md). A group with more is not grouped at
	// that level. A label without a size makes cells of as many as its
	// groups have.
	// +optional
	NodeGroupSizes map[string]int32 `json:"nodeGroupSizes,omitempty"`
}

// PhysicalClusterSpec is HiveD's physicalCluster configuration.
type PhysicalClusterSpec struct {
	// CellTypes maps a cell type name to its definition. Cell types that
	// only appear as a childCellType are leaf cell types.
	CellTypes map[string]CellTypeSpec `json:"cellTypes,omitempty"`

	// PhysicalCells are the top-level physical cells.
	PhysicalCells []PhysicalCellSpec `json:"physicalCells,omitempty"`

	// SkuTypes is HiveD's skuTypes section: per leaf cell type, the
	// resources that go with one leaf cell (e.g. K80: {gpu: 1, cpu: 5,
	// memory: 54Gi}). HiveD does not schedule by it (OpenPAI's RestServer
	// sizes pod requests from it), and neither does hivesched: it is
	// accepted, so that a HiveD physicalCluster section loads as it is, and
	// otherwise ignored (a name that is not a leaf cell type is logged).
	// +optional
	SkuTypes map[string]corev1.ResourceList `json:"skuTypes,omitempty"`
}

// CellTypeSpec defines a cell type as childCellNumber cells of childCellType.
type CellTypeSpec struct {
	ChildCellType   string `json:"childCellType"`
	ChildCellNumber int32  `json:"childCellNumber"`
	// IsNodeLevel marks the cell type that corresponds to one node.
	// +optional
	IsNodeLevel bool `json:"isNodeLevel,omitempty"`
	// TopologyKey names this level by a node label key (for example
	// topology.kubernetes.io/rack), so that a group whose pods must share
	// one domain of that key (a Workload PodGroup's topology constraint)
	// is placed under one cell of this level. A node-level type without
	// one is named kubernetes.io/hostname.
	// +optional
	TopologyKey string `json:"topologyKey,omitempty"`
}

// PhysicalCellSpec is one physical cell and, optionally, its children.
type PhysicalCellSpec struct {
	CellType string `json:"cellType"`
	// +optional
	CellAddress string `json:"cellAddress,omitempty"`
	// PinnedCellID names the cell so that a VirtualCluster can pin it.
	// +optional
	PinnedCellID string `json:"pinnedCellId,omitempty"`
	// +optional
	CellChildren []PhysicalCellSpec `json:"cellChildren,omitempty"`
}
