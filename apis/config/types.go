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

package config

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PluginName is the HiveSched plugin's name in KubeSchedulerConfiguration:
// the profile's plugin and the pluginConfig entry whose args are
// HiveSchedArgs (plugins/hivesched.Name; cmd/hivesched-sim reads the
// physical cluster from that entry without importing the plugin).
const PluginName = "HiveSched"

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
	// PhysicalClusterFromConfig: the args' physicalCluster, written by hand.
	PhysicalClusterFromConfig = "Config"
	// PhysicalClusterFromResourceSlices: derived from the Nodes and the DRA
	// driver's ResourceSlices (plugins/slicetopology; docs/dra.md).
	PhysicalClusterFromResourceSlices = "ResourceSlices"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// HiveSchedArgs are the arguments of the HiveSched plugin (internal version).
// Defaults have been applied when the plugin receives them.
type HiveSchedArgs struct {
	metav1.TypeMeta

	// PhysicalCluster describes the cell types and the physical cells
	// (HiveD's physicalCluster section).
	PhysicalCluster PhysicalClusterSpec

	// PhysicalClusterFrom: PhysicalClusterFromConfig (PhysicalCluster) or
	// PhysicalClusterFromResourceSlices (derived at start from the Nodes
	// and the slices of DRA.Driver, with SliceTopology). "" is Config.
	PhysicalClusterFrom string

	// SliceTopology shapes the derived physical cluster (ResourceSlices
	// only); nil: no node group levels.
	SliceTopology *SliceTopologyArgs

	// PermitWaitingTimeSeconds is how long Permit waits for the whole gang
	// (affinity group) before rejecting it.
	PermitWaitingTimeSeconds int64

	// StatusUpdateIntervalSeconds is the minimum interval between two status
	// writes of the same VirtualCluster.
	StatusUpdateIntervalSeconds int64

	// VictimGracePeriodSeconds caps the grace period a preempted pod is
	// deleted with: a victim's own terminationGracePeriodSeconds (a tenant
	// may set a year) would hold the preemptor's cells that long.
	VictimGracePeriodSeconds int64

	// MaxBindingPods is how many of HiveSched's pods may have their binding
	// API call in flight at once (BindGate Fixed) or the ceiling of the
	// adaptive limit (Adaptive); whole gangs are let through in arrival
	// order (plugins/binding/gate.go). 0: no limit.
	MaxBindingPods int32

	// BindGate: BindGateAdaptive or BindGateFixed (v1 documents it).
	BindGate string

	// MinBindingPods: the adaptive limit's floor.
	MinBindingPods int32

	// MaxBindAttempts: binding failures of a member in a row before its
	// group goes back to Pending (v1 documents it).
	MaxBindAttempts int32

	// InspectBindAddress is where the read-only inspect API listens (plain
	// HTTP, host:port); empty disables it.
	InspectBindAddress string

	// LeafCellResourceName is the extended resource that leaf cells are
	// counted in (e.g. "nvidia.com/gpu").
	LeafCellResourceName string

	// AffinityGroupStatus: the scheduler creates an AffinityGroup for every
	// gang it sees and writes the status of every AffinityGroup. Off, the
	// explicit form still works (pods read their group's spec) but no
	// object is created or written.
	AffinityGroupStatus bool

	// AffinityGroupRetentionSeconds is how long a Completed, Failed or
	// Rejected AffinityGroup is kept before it Expires (the scheduler then
	// deletes the objects it created itself).
	AffinityGroupRetentionSeconds int64

	// DRA says which ResourceClaims hivesched allocates itself (GPU claims)
	// and whose devices its leaf cells are (docs/plugin.md, "DRA").
	DRA DRAArgs
}

// DRAArgs configures Dynamic Resource Allocation of GPU claims.
type DRAArgs struct {
	// GPUDeviceClasses: a ResourceClaim with a request of one of these
	// DeviceClasses is a GPU claim, allocated by hivesched (the cells it
	// decided), never by the profile's DynamicResources. Empty: none.
	GPUDeviceClasses []string

	// Driver is the DRA driver whose devices are the leaf cells: a node's
	// leaf cell i is the device of the node's pool of this driver whose
	// name ends in i (NVIDIA's gpu-<minor>).
	Driver string
}

// SliceTopologyArgs shape the physical cluster derived from ResourceSlices.
type SliceTopologyArgs struct {
	// NodeGroupLabels are node label keys, inner level first: each makes
	// one level of cells above the node, grouping the cells below by the
	// label's value.
	NodeGroupLabels []string
	// NodeGroupSizes: the cells a complete group of a label holds; a
	// smaller group is padded with absent nodes (lost capacity).
	NodeGroupSizes map[string]int32
}

// PhysicalClusterSpec is HiveD's physicalCluster configuration.
type PhysicalClusterSpec struct {
	// CellTypes maps a cell type name to its definition. Cell types that are
	// not keys of this map (but appear as a ChildCellType) are leaf cell types.
	CellTypes map[string]CellTypeSpec

	// PhysicalCells are the top-level physical cells.
	PhysicalCells []PhysicalCellSpec

	// SkuTypes is HiveD's skuTypes section: the resources (gpu, cpu,
	// memory, ...) that go with one leaf cell of each leaf cell type. HiveD
	// does not schedule by it (OpenPAI's RestServer sizes pod requests from
	// it), and neither does hivesched: it is accepted, so that a HiveD
	// physicalCluster section loads as it is, and otherwise ignored.
	SkuTypes map[string]corev1.ResourceList
}

// CellTypeSpec defines a cell type as ChildCellNumber cells of ChildCellType.
type CellTypeSpec struct {
	ChildCellType   string
	ChildCellNumber int32
	// IsNodeLevel marks the cell type that corresponds to one node.
	IsNodeLevel bool
	// TopologyKey names this level by a node label key (for example
	// topology.kubernetes.io/rack), so that a group whose pods must share
	// one domain of that key (a Workload PodGroup's topology constraint)
	// is placed under one cell of this level. A node-level type without
	// one is named kubernetes.io/hostname.
	TopologyKey string
}

// PhysicalCellSpec is one physical cell and, optionally, its children.
type PhysicalCellSpec struct {
	CellType string
	// CellAddress identifies the cell as in HiveD (e.g. the node name for a
	// node-level cell, the device index for a leaf cell); its exact rules are
	// enforced by the cell core.
	CellAddress string
	// PinnedCellID names the cell so that a VirtualCluster can pin it.
	PinnedCellID string
	CellChildren []PhysicalCellSpec
}
