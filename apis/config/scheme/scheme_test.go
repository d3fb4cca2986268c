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

package scheme

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/hivesched/hivesched/apis/config"
)

// decode decodes a KubeSchedulerConfiguration the way kube-scheduler does
// (strict, defaulted, converted to the internal version).
func decode(t *testing.T, data string) (*schedconfig.KubeSchedulerConfiguration, error) {
	t.Helper()
	obj, gvk, err := Codecs.UniversalDecoder().Decode([]byte(data), nil, nil)
	if err != nil {
		return nil, err
	}
	cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
	require.Truef(t, ok, "decoded %v into %T", gvk, obj)
	return cfg, nil
}

// hiveSchedArgs returns the args of the HiveSched plugin of the named profile.
func hiveSchedArgs(t *testing.T, cfg *schedconfig.KubeSchedulerConfiguration, profile string) *config.HiveSchedArgs {
	t.Helper()
	for _, p := range cfg.Profiles {
		if p.SchedulerName != profile {
			continue
		}
		for _, pc := range p.PluginConfig {
			if pc.Name == "HiveSched" {
				args, ok := pc.Args.(*config.HiveSchedArgs)
				require.Truef(t, ok, "HiveSched args have type %T", pc.Args)
				return args
			}
		}
	}
	require.FailNow(t, "no HiveSched pluginConfig", "profile %q", profile)
	return nil
}

func TestDecodeHiveSchedPluginConfig(t *testing.T) {
	cfg, err := decode(t, `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: hivesched
  plugins:
    multiPoint:
      enabled:
      - name: HiveSched
  pluginConfig:
  - name: HiveSched
    args:
      permitWaitingTimeSeconds: 30
      physicalCluster:
        cellTypes:
          V100-NODE:
            childCellType: V100
            childCellNumber: 4
            isNodeLevel: true
          V100-RACK:
            childCellType: V100-NODE
            childCellNumber: 2
        physicalCells:
        - cellType: V100-RACK
          cellChildren:
          - cellAddress: node-0
            pinnedCellId: rack0-node0
          - cellAddress: node-1
`)
	require.NoError(t, err)

	want := &config.HiveSchedArgs{
		PhysicalCluster: config.PhysicalClusterSpec{
			CellTypes: map[string]config.CellTypeSpec{
				"V100-NODE": {ChildCellType: "V100", ChildCellNumber: 4, IsNodeLevel: true},
				"V100-RACK": {ChildCellType: "V100-NODE", ChildCellNumber: 2},
			},
			PhysicalCells: []config.PhysicalCellSpec{{
				CellType: "V100-RACK",
				CellChildren: []config.PhysicalCellSpec{
					{CellAddress: "node-0", PinnedCellID: "rack0-node0"},
					{CellAddress: "node-1"},
				},
			}},
		},
		PhysicalClusterFrom:           config.PhysicalClusterFromConfig, // defaulted
		PermitWaitingTimeSeconds:      30,                               // explicitly set
		StatusUpdateIntervalSeconds:   5,                                // defaulted
		VictimGracePeriodSeconds:      30,                               // defaulted
		MaxBindingPods:                128,                              // defaulted
		BindGate:                      "Adaptive",                       // defaulted
		MinBindingPods:                8,                                // defaulted
		MaxBindAttempts:               3,                                // defaulted
		InspectBindAddress:            "127.0.0.1:10262",                // defaulted
		LeafCellResourceName:          "nvidia.com/gpu",
		AffinityGroupStatus:           true,
		AffinityGroupRetentionSeconds: 600,
		DRA:                           config.DRAArgs{GPUDeviceClasses: []string{"gpu.nvidia.com"}, Driver: "gpu.nvidia.com"},
	}
	assert.Equal(t, want, hiveSchedArgs(t, cfg, "hivesched"))
}

// A plugin enabled without a pluginConfig entry still gets defaulted args.
func TestDecodeEnabledWithoutPluginConfig(t *testing.T) {
	cfg, err := decode(t, `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: hivesched
  plugins:
    multiPoint:
      enabled:
      - name: HiveSched
`)
	require.NoError(t, err)
	assert.Equal(t, &config.HiveSchedArgs{
		PhysicalClusterFrom:           config.PhysicalClusterFromConfig,
		PermitWaitingTimeSeconds:      60,
		StatusUpdateIntervalSeconds:   5,
		VictimGracePeriodSeconds:      30,
		MaxBindingPods:                128,
		BindGate:                      "Adaptive",
		MinBindingPods:                8,
		MaxBindAttempts:               3,
		InspectBindAddress:            "127.0.0.1:10262",
		LeafCellResourceName:          "nvidia.com/gpu",
		AffinityGroupStatus:           true,
		AffinityGroupRetentionSeconds: 600,
		DRA:                           config.DRAArgs{GPUDeviceClasses: []string{"gpu.nvidia.com"}, Driver: "gpu.nvidia.com"},
	}, hiveSchedArgs(t, cfg, "hivesched"))
}

func TestDecodeRejectsUnknownField(t *testing.T) {
	_, err := decode(t, `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: hivesched
  pluginConfig:
  - name: HiveSched
    args:
      permitWaitingTime: 30
`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `decoding args for plugin HiveSched`)
	assert.Contains(t, err.Error(), `unknown field "permitWaitingTime"`)
}

// The dra section: an explicit empty list of GPU classes turns GPU claims
// off (it is not defaulted), a driver is kept.
func TestDecodeDRA(t *testing.T) {
	cfg, err := decode(t, `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: a
  pluginConfig:
  - name: HiveSched
    args:
      dra:
        gpuDeviceClasses: []
        driver: gpu.example.com
- schedulerName: b
  pluginConfig:
  - name: HiveSched
    args:
      dra:
        gpuDeviceClasses: [gpu.nvidia.com, gpu-big.example.com]
`)
	require.NoError(t, err)
	assert.Equal(t, config.DRAArgs{GPUDeviceClasses: []string{}, Driver: "gpu.example.com"}, hiveSchedArgs(t, cfg, "a").DRA)
	assert.Equal(t, config.DRAArgs{GPUDeviceClasses: []string{"gpu.nvidia.com", "gpu-big.example.com"}, Driver: "gpu.nvidia.com"}, hiveSchedArgs(t, cfg, "b").DRA)
}

// TestDecodePhysicalClusterFrom: the mode defaults to Config, and
// ResourceSlices decodes with its sliceTopology and no physicalCluster.
func TestDecodePhysicalClusterFrom(t *testing.T) {
	cfg, err := decode(t, `
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: a
  pluginConfig:
  - name: HiveSched
    args:
      physicalClusterFrom: ResourceSlices
      sliceTopology:
        nodeGroupLabels: [nvidia.com/gpu.clique, topology.kubernetes.io/rack]
- schedulerName: b
  pluginConfig:
  - name: HiveSched
    args: {}
`)
	require.NoError(t, err)
	a := hiveSchedArgs(t, cfg, "a")
	assert.Equal(t, config.PhysicalClusterFromResourceSlices, a.PhysicalClusterFrom)
	assert.Equal(t, &config.SliceTopologyArgs{NodeGroupLabels: []string{"nvidia.com/gpu.clique", "topology.kubernetes.io/rack"}}, a.SliceTopology)
	assert.Equal(t, config.PhysicalClusterSpec{}, a.PhysicalCluster)
	b := hiveSchedArgs(t, cfg, "b")
	assert.Equal(t, config.PhysicalClusterFromConfig, b.PhysicalClusterFrom)
	assert.Nil(t, b.SliceTopology)
}
