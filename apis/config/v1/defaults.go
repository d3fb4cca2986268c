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

const (
	// DefaultPermitWaitingTimeSeconds is the default PermitWaitingTimeSeconds.
	DefaultPermitWaitingTimeSeconds int64 = 60
	// DefaultStatusUpdateIntervalSeconds is the default StatusUpdateIntervalSeconds.
	DefaultStatusUpdateIntervalSeconds int64 = 5
	// DefaultVictimGracePeriodSeconds is the default VictimGracePeriodSeconds.
	DefaultVictimGracePeriodSeconds int64 = 30
	// DefaultMaxBindingPods is the default MaxBindingPods with BindGate
	// Adaptive: the ceiling the limit moves under. Above the depth a busy
	// API server of test/perf keeps in steady state (35-50 bindings in
	// flight at 350 pods/s), with room for a bigger one, and far below the
	// floods of 1000 and more that make a gang's bindings land seconds
	// apart (docs/perf.md, "Bind spread" and "The adaptive bind gate").
	DefaultMaxBindingPods int32 = 128
	// DefaultFixedMaxBindingPods is the default MaxBindingPods with
	// BindGate Fixed (the default before the adaptive gate): two gangs of
	// 8 in flight. A gang's members land apart by about the API server's
	// latency variance at the depth it is kept at: in test/perf (500 and
	// 5000 nodes, Gangs8x1) 16 kept the bind spread p99 at 43-64 ms with
	// throughput equal to or above 64's and no gate's; 64 gave 93-209 ms.
	// The cost: while pods are created faster than the API server binds
	// them, they wait here instead of in the API server (docs/perf.md,
	// "Bind spread").
	DefaultFixedMaxBindingPods int32 = 16
	// DefaultMinBindingPods is the default MinBindingPods: the adaptive
	// limit never goes below one gang of 8 at a time.
	DefaultMinBindingPods int32 = 8
	// DefaultMaxBindAttempts is the default MaxBindAttempts: enough for an
	// API server restart or a conflict to pass (the framework backs a pod
	// off 1 s, then 2 s), few enough that a gang is not held partly bound
	// for long by a binding that never succeeds.
	DefaultMaxBindAttempts int32 = 3
	// DefaultInspectBindAddress is the default InspectBindAddress.
	DefaultInspectBindAddress = "127.0.0.1:10262"
	// DefaultLeafCellResourceName is the default LeafCellResourceName.
	DefaultLeafCellResourceName = "nvidia.com/gpu"
	// DefaultAffinityGroupRetentionSeconds is the default AffinityGroupRetentionSeconds.
	DefaultAffinityGroupRetentionSeconds int64 = 600
	// DefaultGPUDeviceClass is the default DRA.GPUDeviceClasses: the
	// DeviceClass NVIDIA's DRA driver installs for whole GPUs.
	DefaultGPUDeviceClass = "gpu.nvidia.com"
	// DefaultDRADriver is the default DRA.Driver: NVIDIA's GPU driver.
	DefaultDRADriver = "gpu.nvidia.com"
)

// SetDefaults_HiveSchedArgs sets the defaults of unset HiveSchedArgs fields.
func SetDefaults_HiveSchedArgs(obj *HiveSchedArgs) { //nolint:revive,stylecheck // name required by defaulter-gen
	if obj.PermitWaitingTimeSeconds == nil {
		v := DefaultPermitWaitingTimeSeconds
		obj.PermitWaitingTimeSeconds = &v
	}
	if obj.StatusUpdateIntervalSeconds == nil {
		v := DefaultStatusUpdateIntervalSeconds
		obj.StatusUpdateIntervalSeconds = &v
	}
	if obj.VictimGracePeriodSeconds == nil {
		v := DefaultVictimGracePeriodSeconds
		obj.VictimGracePeriodSeconds = &v
	}
	if obj.BindGate == nil {
		// A configuration written before bindGate existed that sets
		// maxBindingPods asked for that fixed limit: it keeps it.
		v := BindGateAdaptive
		if obj.MaxBindingPods != nil {
			v = BindGateFixed
		}
		obj.BindGate = &v
	}
	if obj.MaxBindingPods == nil {
		v := DefaultMaxBindingPods
		if *obj.BindGate == BindGateFixed {
			v = DefaultFixedMaxBindingPods
		}
		obj.MaxBindingPods = &v
	}
	if obj.MinBindingPods == nil {
		v := DefaultMinBindingPods
		obj.MinBindingPods = &v
	}
	if obj.MaxBindAttempts == nil {
		v := DefaultMaxBindAttempts
		obj.MaxBindAttempts = &v
	}
	if obj.InspectBindAddress == nil {
		v := DefaultInspectBindAddress
		obj.InspectBindAddress = &v
	}
	if obj.LeafCellResourceName == nil || *obj.LeafCellResourceName == "" {
		v := DefaultLeafCellResourceName
		obj.LeafCellResourceName = &v
	}
	if obj.AffinityGroupStatus == nil {
		v := true
		obj.AffinityGroupStatus = &v
	}
	if obj.AffinityGroupRetentionSeconds == nil {
		v := DefaultAffinityGroupRetentionSeconds
		obj.AffinityGroupRetentionSeconds = &v
	}
	if obj.PhysicalClusterFrom == nil || *obj.PhysicalClusterFrom == "" {
		v := PhysicalClusterFromConfig
		obj.PhysicalClusterFrom = &v
	}
	if obj.DRA == nil {
		obj.DRA = &DRAArgs{}
	}
	if obj.DRA.GPUDeviceClasses == nil {
		obj.DRA.GPUDeviceClasses = []string{DefaultGPUDeviceClass}
	}
	if obj.DRA.Driver == nil || *obj.DRA.Driver == "" {
		v := DefaultDRADriver
		obj.DRA.Driver = &v
	}
}
