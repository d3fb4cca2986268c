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
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func TestSetDefaultsHiveSchedArgs(t *testing.T) {
	tests := []struct {
		name string
		in   *HiveSchedArgs
		want *HiveSchedArgs
	}{
		{
			name: "empty args get all defaults",
			in:   &HiveSchedArgs{},
			want: &HiveSchedArgs{
				PermitWaitingTimeSeconds:      ptr.To[int64](60),
				StatusUpdateIntervalSeconds:   ptr.To[int64](5),
				VictimGracePeriodSeconds:      ptr.To[int64](30),
				MaxBindingPods:                ptr.To[int32](128),
				BindGate:                      ptr.To("Adaptive"),
				MinBindingPods:                ptr.To[int32](8),
				MaxBindAttempts:               ptr.To[int32](3),
				InspectBindAddress:            ptr.To("127.0.0.1:10262"),
				LeafCellResourceName:          ptr.To("nvidia.com/gpu"),
				AffinityGroupStatus:           ptr.To(true),
				AffinityGroupRetentionSeconds: ptr.To[int64](600),
				DRA:                           &DRAArgs{GPUDeviceClasses: []string{"gpu.nvidia.com"}, Driver: ptr.To("gpu.nvidia.com")},
				PhysicalClusterFrom:           ptr.To("Config"),
			},
		},
		{
			name: "empty resource name is defaulted",
			in:   &HiveSchedArgs{LeafCellResourceName: ptr.To("")},
			want: &HiveSchedArgs{
				PermitWaitingTimeSeconds:      ptr.To[int64](60),
				StatusUpdateIntervalSeconds:   ptr.To[int64](5),
				VictimGracePeriodSeconds:      ptr.To[int64](30),
				MaxBindingPods:                ptr.To[int32](128),
				BindGate:                      ptr.To("Adaptive"),
				MinBindingPods:                ptr.To[int32](8),
				MaxBindAttempts:               ptr.To[int32](3),
				InspectBindAddress:            ptr.To("127.0.0.1:10262"),
				LeafCellResourceName:          ptr.To("nvidia.com/gpu"),
				AffinityGroupStatus:           ptr.To(true),
				AffinityGroupRetentionSeconds: ptr.To[int64](600),
				DRA:                           &DRAArgs{GPUDeviceClasses: []string{"gpu.nvidia.com"}, Driver: ptr.To("gpu.nvidia.com")},
				PhysicalClusterFrom:           ptr.To("Config"),
			},
		},
		{
			name: "set values are kept, including zero",
			in: &HiveSchedArgs{
				PermitWaitingTimeSeconds:      ptr.To[int64](0),
				StatusUpdateIntervalSeconds:   ptr.To[int64](30),
				VictimGracePeriodSeconds:      ptr.To[int64](0),
				MaxBindingPods:                ptr.To[int32](0),
				MaxBindAttempts:               ptr.To[int32](7),
				InspectBindAddress:            ptr.To(""),
				LeafCellResourceName:          ptr.To("amd.com/gpu"),
				AffinityGroupStatus:           ptr.To(false),
				AffinityGroupRetentionSeconds: ptr.To[int64](0),
				DRA:                           &DRAArgs{GPUDeviceClasses: []string{}, Driver: ptr.To("amd.com")},
			},
			want: &HiveSchedArgs{
				PermitWaitingTimeSeconds:      ptr.To[int64](0),
				StatusUpdateIntervalSeconds:   ptr.To[int64](30),
				VictimGracePeriodSeconds:      ptr.To[int64](0),
				MaxBindingPods:                ptr.To[int32](0),
				BindGate:                      ptr.To("Fixed"),
				MinBindingPods:                ptr.To[int32](8),
				MaxBindAttempts:               ptr.To[int32](7),
				InspectBindAddress:            ptr.To(""),
				LeafCellResourceName:          ptr.To("amd.com/gpu"),
				AffinityGroupStatus:           ptr.To(false),
				AffinityGroupRetentionSeconds: ptr.To[int64](0),
				DRA:                           &DRAArgs{GPUDeviceClasses: []string{}, Driver: ptr.To("amd.com")},
				PhysicalClusterFrom:           ptr.To("Config"),
			},
		},
		{
			name: "physical cluster is left alone",
			in: &HiveSchedArgs{PhysicalCluster: PhysicalClusterSpec{
				CellTypes: map[string]CellTypeSpec{"NODE": {ChildCellType: "GPU", ChildCellNumber: 4, IsNodeLevel: true}},
			}},
			want: &HiveSchedArgs{
				PhysicalCluster: PhysicalClusterSpec{
					CellTypes: map[string]CellTypeSpec{"NODE": {ChildCellType: "GPU", ChildCellNumber: 4, IsNodeLevel: true}},
				},
				PermitWaitingTimeSeconds:      ptr.To[int64](60),
				StatusUpdateIntervalSeconds:   ptr.To[int64](5),
				VictimGracePeriodSeconds:      ptr.To[int64](30),
				MaxBindingPods:                ptr.To[int32](128),
				BindGate:                      ptr.To("Adaptive"),
				MinBindingPods:                ptr.To[int32](8),
				MaxBindAttempts:               ptr.To[int32](3),
				InspectBindAddress:            ptr.To("127.0.0.1:10262"),
				LeafCellResourceName:          ptr.To("nvidia.com/gpu"),
				AffinityGroupStatus:           ptr.To(true),
				AffinityGroupRetentionSeconds: ptr.To[int64](600),
				DRA:                           &DRAArgs{GPUDeviceClasses: []string{"gpu.nvidia.com"}, Driver: ptr.To("gpu.nvidia.com")},
				PhysicalClusterFrom:           ptr.To("Config"),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			SetDefaults_HiveSchedArgs(tc.in)
			assert.Equal(t, tc.want, tc.in)
		})
	}
}

// The bind gate's mode and limits: adaptive by default, and a configuration
// from before bindGate existed that sets maxBindingPods keeps its fixed
// limit.
func TestSetDefaultsBindGate(t *testing.T) {
	tests := []struct {
		name     string
		in       *HiveSchedArgs
		gate     string
		max, min int32
	}{
		{name: "nothing set: adaptive under 128", in: &HiveSchedArgs{}, gate: "Adaptive", max: 128, min: 8},
		{name: "maxBindingPods alone: fixed, as before", in: &HiveSchedArgs{MaxBindingPods: ptr.To[int32](32)}, gate: "Fixed", max: 32, min: 8},
		{name: "maxBindingPods 0 alone: no gate", in: &HiveSchedArgs{MaxBindingPods: ptr.To[int32](0)}, gate: "Fixed", max: 0, min: 8},
		{name: "fixed alone: the old default 16", in: &HiveSchedArgs{BindGate: ptr.To("Fixed")}, gate: "Fixed", max: 16, min: 8},
		{name: "adaptive with a ceiling and a floor", in: &HiveSchedArgs{BindGate: ptr.To("Adaptive"), MaxBindingPods: ptr.To[int32](64), MinBindingPods: ptr.To[int32](16)},
			gate: "Adaptive", max: 64, min: 16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			SetDefaults_HiveSchedArgs(tc.in)
			assert.Equal(t, tc.gate, *tc.in.BindGate)
			assert.Equal(t, tc.max, *tc.in.MaxBindingPods)
			assert.Equal(t, tc.min, *tc.in.MinBindingPods)
		})
	}
}

// The defaulting function must be reachable through a scheme (that is how
// the kube-scheduler applies it).
func TestSchemeDefaulting(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, AddToScheme(s))
	args := &HiveSchedArgs{}
	s.Default(args)
	assert.Equal(t, DefaultPermitWaitingTimeSeconds, *args.PermitWaitingTimeSeconds)
	assert.Equal(t, DefaultStatusUpdateIntervalSeconds, *args.StatusUpdateIntervalSeconds)
	assert.Equal(t, DefaultLeafCellResourceName, *args.LeafCellResourceName)
	assert.True(t, *args.AffinityGroupStatus)
	assert.Equal(t, DefaultAffinityGroupRetentionSeconds, *args.AffinityGroupRetentionSeconds)
	assert.Equal(t, []string{DefaultGPUDeviceClass}, args.DRA.GPUDeviceClasses)
	assert.Equal(t, DefaultDRADriver, *args.DRA.Driver)
}
