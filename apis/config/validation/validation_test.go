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

package validation

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hivesched/hivesched/apis/config"
)

func validArgs() *config.HiveSchedArgs {
	return &config.HiveSchedArgs{
		PhysicalCluster: config.PhysicalClusterSpec{
			CellTypes: map[string]config.CellTypeSpec{
				"V100-NODE": {ChildCellType: "V100", ChildCellNumber: 4, IsNodeLevel: true},
			},
			PhysicalCells: []config.PhysicalCellSpec{{CellType: "V100-NODE", CellAddress: "node-0"}},
		},
		PermitWaitingTimeSeconds:    60,
		StatusUpdateIntervalSeconds: 5,
		VictimGracePeriodSeconds:    30,
		MaxBindAttempts:             3,
		LeafCellResourceName:        "nvidia.com/gpu",
		DRA:                         config.DRAArgs{GPUDeviceClasses: []string{"gpu.nvidia.com"}, Driver: "gpu.nvidia.com"},
	}
}

func TestValidateHiveSchedArgs(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*config.HiveSchedArgs)
		nilArgs bool
		// wantErrs are substrings that must all appear in the error; empty
		// means the args are valid.
		wantErrs []string
	}{
		{name: "valid", mutate: func(*config.HiveSchedArgs) {}},
		{
			name:     "nil args",
			nilArgs:  true,
			wantErrs: []string{"args: Required value"},
		},
		{name: "inspect API disabled", mutate: func(a *config.HiveSchedArgs) { a.InspectBindAddress = "" }},
		{name: "inspect API on all addresses", mutate: func(a *config.HiveSchedArgs) { a.InspectBindAddress = ":10262" }},
		{name: "topology key", mutate: func(a *config.HiveSchedArgs) {
			a.PhysicalCluster.CellTypes["V100-NODE"] = config.CellTypeSpec{ChildCellType: "V100", ChildCellNumber: 4, IsNodeLevel: true, TopologyKey: "topology.kubernetes.io/rack"}
		}},
		{
			name: "topology key that is no label key",
			mutate: func(a *config.HiveSchedArgs) {
				a.PhysicalCluster.CellTypes["V100-NODE"] = config.CellTypeSpec{ChildCellType: "V100", ChildCellNumber: 4, IsNodeLevel: true, TopologyKey: "rack name"}
			},
			wantErrs: []string{`physicalCluster.cellTypes[V100-NODE].topologyKey: Invalid value: "rack name": must be a node label key`},
		},
		{
			name:     "inspect address without a port",
			mutate:   func(a *config.HiveSchedArgs) { a.InspectBindAddress = "localhost" },
			wantErrs: []string{"args.inspectBindAddress: Invalid value: \"localhost\": must be host:port"},
		},
		{
			name:     "zero permit waiting time",
			mutate:   func(a *config.HiveSchedArgs) { a.PermitWaitingTimeSeconds = 0 },
			wantErrs: []string{"args.permitWaitingTimeSeconds: Invalid value: 0: must be from 1 to 900"},
		},
		{
			name:     "negative status update interval",
			mutate:   func(a *config.HiveSchedArgs) { a.StatusUpdateIntervalSeconds = -1 },
			wantErrs: []string{"args.statusUpdateIntervalSeconds: Invalid value: -1: must be from 1 to 86400"},
		},
		{
			// As a time.Duration this overflowed into a negative interval
			// and the status writer's ticker panicked at start.
			name:     "status update interval that would overflow a duration",
			mutate:   func(a *config.HiveSchedArgs) { a.StatusUpdateIntervalSeconds = 1 << 40 },
			wantErrs: []string{"args.statusUpdateIntervalSeconds: Invalid value: 1099511627776: must be from 1 to 86400"},
		},
		{
			name:     "permit waiting time above the cap",
			mutate:   func(a *config.HiveSchedArgs) { a.PermitWaitingTimeSeconds = 901 },
			wantErrs: []string{"args.permitWaitingTimeSeconds: Invalid value: 901: must be from 1 to 900"},
		},
		{name: "victims deleted at once", mutate: func(a *config.HiveSchedArgs) { a.VictimGracePeriodSeconds = 0 }},
		{name: "finished affinity groups expire at once", mutate: func(a *config.HiveSchedArgs) { a.AffinityGroupRetentionSeconds = 0 }},
		{
			name:     "negative affinity group retention",
			mutate:   func(a *config.HiveSchedArgs) { a.AffinityGroupRetentionSeconds = -1 },
			wantErrs: []string{"args.affinityGroupRetentionSeconds: Invalid value: -1: must be from 0 to 2592000"},
		},
		{name: "victim grace period at the cap", mutate: func(a *config.HiveSchedArgs) { a.VictimGracePeriodSeconds = 3600 }},
		{name: "no binding limit", mutate: func(a *config.HiveSchedArgs) { a.MaxBindingPods = 0 }},
		{name: "binding limit at the cap", mutate: func(a *config.HiveSchedArgs) { a.MaxBindingPods = 10000 }},
		{name: "adaptive bind gate", mutate: func(a *config.HiveSchedArgs) {
			a.BindGate, a.MaxBindingPods, a.MinBindingPods = config.BindGateAdaptive, 128, 8
		}},
		{name: "fixed bind gate", mutate: func(a *config.HiveSchedArgs) { a.BindGate, a.MaxBindingPods = config.BindGateFixed, 16 }},
		{
			name:     "unknown bind gate",
			mutate:   func(a *config.HiveSchedArgs) { a.BindGate = "Auto" },
			wantErrs: []string{`args.bindGate: Unsupported value: "Auto": supported values: "Adaptive", "Fixed"`},
		},
		{
			name:     "negative adaptive floor",
			mutate:   func(a *config.HiveSchedArgs) { a.MinBindingPods = -1 },
			wantErrs: []string{"args.minBindingPods: Invalid value: -1: must be from 1 to 10000"},
		},
		{
			name:     "adaptive floor over the cap",
			mutate:   func(a *config.HiveSchedArgs) { a.MinBindingPods = 10001 },
			wantErrs: []string{"args.minBindingPods: Invalid value: 10001: must be from 1 to 10000"},
		},
		{
			name:     "negative binding limit",
			mutate:   func(a *config.HiveSchedArgs) { a.MaxBindingPods = -1 },
			wantErrs: []string{"args.maxBindingPods: Invalid value: -1: must be from 0 (no limit) to 10000"},
		},
		{name: "one bind attempt", mutate: func(a *config.HiveSchedArgs) { a.MaxBindAttempts = 1 }},
		{
			name:     "no bind attempt",
			mutate:   func(a *config.HiveSchedArgs) { a.MaxBindAttempts = 0 },
			wantErrs: []string{"args.maxBindAttempts: Invalid value: 0: must be from 1 to 100"},
		},
		{
			name:     "bind attempts above the cap",
			mutate:   func(a *config.HiveSchedArgs) { a.MaxBindAttempts = 101 },
			wantErrs: []string{"args.maxBindAttempts: Invalid value: 101: must be from 1 to 100"},
		},
		{
			name:     "victim grace period above the cap",
			mutate:   func(a *config.HiveSchedArgs) { a.VictimGracePeriodSeconds = 3601 },
			wantErrs: []string{"args.victimGracePeriodSeconds: Invalid value: 3601: must be from 0 to 3600"},
		},
		{
			name:     "negative victim grace period",
			mutate:   func(a *config.HiveSchedArgs) { a.VictimGracePeriodSeconds = -1 },
			wantErrs: []string{"args.victimGracePeriodSeconds: Invalid value: -1: must be from 0 to 3600"},
		},
		{
			name:     "empty resource name",
			mutate:   func(a *config.HiveSchedArgs) { a.LeafCellResourceName = "" },
			wantErrs: []string{"args.leafCellResourceName: Required value"},
		},
		{
			name:     "malformed resource name",
			mutate:   func(a *config.HiveSchedArgs) { a.LeafCellResourceName = "nvidia.com/gpu/x" },
			wantErrs: []string{"args.leafCellResourceName: Invalid value"},
		},
		{name: "no GPU device classes", mutate: func(a *config.HiveSchedArgs) { a.DRA.GPUDeviceClasses = nil }},
		{
			name:     "malformed GPU device class",
			mutate:   func(a *config.HiveSchedArgs) { a.DRA.GPUDeviceClasses = []string{"gpu.nvidia.com", "GPU_Class"} },
			wantErrs: []string{"args.dra.gpuDeviceClasses[1]: Invalid value: \"GPU_Class\": a DeviceClass name"},
		},
		{
			name:     "no DRA driver",
			mutate:   func(a *config.HiveSchedArgs) { a.DRA.Driver = "" },
			wantErrs: []string{"args.dra.driver: Required value"},
		},
		{
			name:     "no cell types",
			mutate:   func(a *config.HiveSchedArgs) { a.PhysicalCluster.CellTypes = nil },
			wantErrs: []string{"args.physicalCluster.cellTypes: Required value"},
		},
		{
			name:     "no physical cells",
			mutate:   func(a *config.HiveSchedArgs) { a.PhysicalCluster.PhysicalCells = nil },
			wantErrs: []string{"args.physicalCluster.physicalCells: Required value"},
		},
		{
			name: "physical cluster from ResourceSlices",
			mutate: func(a *config.HiveSchedArgs) {
				a.PhysicalClusterFrom = config.PhysicalClusterFromResourceSlices
				a.PhysicalCluster = config.PhysicalClusterSpec{}
				a.SliceTopology = &config.SliceTopologyArgs{NodeGroupLabels: []string{"nvidia.com/gpu.clique", "topology.kubernetes.io/rack"}}
			},
		},
		{
			name: "ResourceSlices without sliceTopology",
			mutate: func(a *config.HiveSchedArgs) {
				a.PhysicalClusterFrom = config.PhysicalClusterFromResourceSlices
				a.PhysicalCluster = config.PhysicalClusterSpec{}
			},
		},
		{
			name:     "ResourceSlices with a physicalCluster",
			mutate:   func(a *config.HiveSchedArgs) { a.PhysicalClusterFrom = config.PhysicalClusterFromResourceSlices },
			wantErrs: []string{"args.physicalCluster: Forbidden: must be empty with physicalClusterFrom: ResourceSlices"},
		},
		{
			name:     "sliceTopology with Config",
			mutate:   func(a *config.HiveSchedArgs) { a.SliceTopology = &config.SliceTopologyArgs{} },
			wantErrs: []string{"args.sliceTopology: Forbidden: only with physicalClusterFrom: ResourceSlices"},
		},
		{
			name:     "unknown physicalClusterFrom",
			mutate:   func(a *config.HiveSchedArgs) { a.PhysicalClusterFrom = "Slices" },
			wantErrs: []string{`args.physicalClusterFrom: Unsupported value: "Slices": supported values: "Config", "ResourceSlices"`},
		},
		{
			name: "bad node group labels",
			mutate: func(a *config.HiveSchedArgs) {
				a.PhysicalClusterFrom = config.PhysicalClusterFromResourceSlices
				a.PhysicalCluster = config.PhysicalClusterSpec{}
				a.SliceTopology = &config.SliceTopologyArgs{NodeGroupLabels: []string{"topology.kubernetes.io/rack", "bad key!", "topology.kubernetes.io/rack", "example.com/rack"}}
			},
			wantErrs: []string{
				`args.sliceTopology.nodeGroupLabels[1]: Invalid value: "bad key!": must be a node label key`,
				`args.sliceTopology.nodeGroupLabels[2]: Duplicate value: "topology.kubernetes.io/rack"`,
				`args.sliceTopology.nodeGroupLabels[3]: Invalid value: "example.com/rack": its level name "rack" (the key's name after its last '.') is also topology.kubernetes.io/rack's`,
			},
		},
		{
			name: "bad node group sizes",
			mutate: func(a *config.HiveSchedArgs) {
				a.PhysicalClusterFrom = config.PhysicalClusterFromResourceSlices
				a.PhysicalCluster = config.PhysicalClusterSpec{}
				a.SliceTopology = &config.SliceTopologyArgs{NodeGroupLabels: []string{"nvidia.com/gpu.clique"},
					NodeGroupSizes: map[string]int32{"nvidia.com/gpu.clique": 0, "topology.kubernetes.io/rack": 4}}
			},
			wantErrs: []string{
				`args.sliceTopology.nodeGroupSizes[nvidia.com/gpu.clique]: Invalid value: 0: must be between 1 and 4096`,
				`args.sliceTopology.nodeGroupSizes[topology.kubernetes.io/rack]: Invalid value: "topology.kubernetes.io/rack": not a key of nodeGroupLabels: a size is of a level the derivation makes`,
			},
		},
		{
			name: "all errors are reported together",
			mutate: func(a *config.HiveSchedArgs) {
				*a = config.HiveSchedArgs{}
			},
			wantErrs: []string{
				"args.permitWaitingTimeSeconds",
				"args.statusUpdateIntervalSeconds",
				"args.leafCellResourceName",
				"args.dra.driver",
				"args.physicalCluster.cellTypes",
				"args.physicalCluster.physicalCells",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var args *config.HiveSchedArgs
			if !tc.nilArgs {
				args = validArgs()
				tc.mutate(args)
			}
			err := ValidateHiveSchedArgs(field.NewPath("args"), args)
			if len(tc.wantErrs) == 0 {
				assert.NoError(t, err)
				return
			}
			if assert.Error(t, err) {
				for _, want := range tc.wantErrs {
					assert.Contains(t, err.Error(), want)
				}
			}
		})
	}
}
