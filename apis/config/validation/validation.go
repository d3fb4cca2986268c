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

// Package validation validates HiveSchedArgs. Only the scalar fields and the
// presence of a cell model are checked here; the cell core validates the
// cell hierarchy itself (unknown types, cycles, addresses, pinned ids).
package validation

import (
	"fmt"
	"net"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/hivesched/hivesched/apis/config"
)

// Upper bounds of the duration args. Each becomes a time.Duration (int64
// nanoseconds): a number of seconds above about 292 years overflowed into a
// negative interval and panicked the status writer's ticker at start. The
// bounds are far below that, at what still makes sense for each.
const (
	// MaxPermitWaitingTimeSeconds: a gang whose members are not all there
	// within 15 minutes holds its cells Reserved for nobody.
	MaxPermitWaitingTimeSeconds int64 = 900
	// MaxStatusUpdateIntervalSeconds: a VC status a day old is still written.
	MaxStatusUpdateIntervalSeconds int64 = 86400
	// MaxVictimGracePeriodSeconds: the preemptor waits at most an hour.
	MaxVictimGracePeriodSeconds int64 = 3600
	// MaxAffinityGroupRetentionSeconds: a finished group is kept at most 30 days.
	MaxAffinityGroupRetentionSeconds int64 = 30 * 86400
)

// MaxMaxBindingPods bounds maxBindingPods: a limit above it is no limit in
// practice, and 0 says that plainly.
const MaxMaxBindingPods int32 = 10000

// MaxMaxBindAttempts bounds maxBindAttempts: with the framework's backoff
// (at most 10 s) a gang is held partly bound at most about a quarter hour.
const MaxMaxBindAttempts int32 = 100

// ValidateHiveSchedArgs validates the scalar fields of args and that a cell
// model is present. path is the field path of args (may be nil).
func ValidateHiveSchedArgs(path *field.Path, args *config.HiveSchedArgs) error {
	if args == nil {
		return field.ErrorList{field.Required(path, "HiveSchedArgs must be set")}.ToAggregate()
	}
	var allErrs field.ErrorList

	if v := args.PermitWaitingTimeSeconds; v <= 0 || v > MaxPermitWaitingTimeSeconds {
		allErrs = append(allErrs, field.Invalid(path.Child("permitWaitingTimeSeconds"),
			v, fmt.Sprintf("must be from 1 to %d", MaxPermitWaitingTimeSeconds)))
	}
	if v := args.StatusUpdateIntervalSeconds; v <= 0 || v > MaxStatusUpdateIntervalSeconds {
		allErrs = append(allErrs, field.Invalid(path.Child("statusUpdateIntervalSeconds"),
			v, fmt.Sprintf("must be from 1 to %d", MaxStatusUpdateIntervalSeconds)))
	}
	if v := args.VictimGracePeriodSeconds; v < 0 || v > MaxVictimGracePeriodSeconds {
		allErrs = append(allErrs, field.Invalid(path.Child("victimGracePeriodSeconds"),
			v, fmt.Sprintf("must be from 0 to %d", MaxVictimGracePeriodSeconds)))
	}
	if v := args.MaxBindingPods; v < 0 || v > MaxMaxBindingPods {
		allErrs = append(allErrs, field.Invalid(path.Child("maxBindingPods"),
			v, fmt.Sprintf("must be from 0 (no limit) to %d", MaxMaxBindingPods)))
	}
	// Args that did not go through v1's defaulting (built in Go) have
	// neither: "" is Fixed (maxBindingPods as it is) and 0 the default floor.
	switch args.BindGate {
	case config.BindGateAdaptive, config.BindGateFixed, "":
	default:
		allErrs = append(allErrs, field.NotSupported(path.Child("bindGate"), args.BindGate,
			[]string{config.BindGateAdaptive, config.BindGateFixed}))
	}
	if v := args.MinBindingPods; v < 0 || v > MaxMaxBindingPods {
		allErrs = append(allErrs, field.Invalid(path.Child("minBindingPods"),
			v, fmt.Sprintf("must be from 1 to %d", MaxMaxBindingPods)))
	}
	if v := args.MaxBindAttempts; v < 1 || v > MaxMaxBindAttempts {
		allErrs = append(allErrs, field.Invalid(path.Child("maxBindAttempts"),
			v, fmt.Sprintf("must be from 1 to %d", MaxMaxBindAttempts)))
	}
	if v := args.AffinityGroupRetentionSeconds; v < 0 || v > MaxAffinityGroupRetentionSeconds {
		allErrs = append(allErrs, field.Invalid(path.Child("affinityGroupRetentionSeconds"),
			v, fmt.Sprintf("must be from 0 to %d", MaxAffinityGroupRetentionSeconds)))
	}
	if a := args.InspectBindAddress; a != "" {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			allErrs = append(allErrs, field.Invalid(path.Child("inspectBindAddress"), a, "must be host:port (\"127.0.0.1:10262\", \":10262\") or empty to disable the inspect API"))
		}
	}

	rnPath := path.Child("leafCellResourceName")
	if args.LeafCellResourceName == "" {
		allErrs = append(allErrs, field.Required(rnPath, "must be a resource name such as nvidia.com/gpu"))
	} else {
		for _, msg := range validation.IsQualifiedName(args.LeafCellResourceName) {
			allErrs = append(allErrs, field.Invalid(rnPath, args.LeafCellResourceName, msg))
		}
	}

	draPath := path.Child("dra")
	for i, c := range args.DRA.GPUDeviceClasses {
		for _, msg := range validation.IsDNS1123Subdomain(c) {
			allErrs = append(allErrs, field.Invalid(draPath.Child("gpuDeviceClasses").Index(i), c, "a DeviceClass name: "+msg))
		}
	}
	if d := args.DRA.Driver; d == "" {
		allErrs = append(allErrs, field.Required(draPath.Child("driver"), "must name the DRA driver of the GPUs, such as gpu.nvidia.com"))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(d) {
			allErrs = append(allErrs, field.Invalid(draPath.Child("driver"), d, "a DRA driver name: "+msg))
		}
	}

	pcPath := path.Child("physicalCluster")
	switch args.PhysicalClusterFrom {
	case config.PhysicalClusterFromConfig, "":
		if args.SliceTopology != nil {
			allErrs = append(allErrs, field.Forbidden(path.Child("sliceTopology"),
				"only with physicalClusterFrom: ResourceSlices (the physical cluster is physicalCluster)"))
		}
		allErrs = append(allErrs, validatePhysicalCluster(pcPath, &args.PhysicalCluster)...)
	case config.PhysicalClusterFromResourceSlices:
		// The plugin derives physicalCluster: one written beside would be
		// ignored or contradict it.
		if len(args.PhysicalCluster.CellTypes) > 0 || len(args.PhysicalCluster.PhysicalCells) > 0 || len(args.PhysicalCluster.SkuTypes) > 0 {
			allErrs = append(allErrs, field.Forbidden(pcPath,
				"must be empty with physicalClusterFrom: ResourceSlices (the cells are derived from the ResourceSlices of dra.driver); remove it, or set physicalClusterFrom: Config"))
		}
		if args.SliceTopology != nil {
			allErrs = append(allErrs, validateSliceTopology(path.Child("sliceTopology"), args.SliceTopology)...)
		}
	default:
		allErrs = append(allErrs, field.NotSupported(path.Child("physicalClusterFrom"), args.PhysicalClusterFrom,
			[]string{config.PhysicalClusterFromConfig, config.PhysicalClusterFromResourceSlices}))
	}

	return allErrs.ToAggregate()
}

// ValidatePhysicalCluster checks that a physical cluster has cells and that
// its topology keys are node label keys (the cell core checks the rest).
// path is the physicalCluster field's path; a derived cluster is checked
// with it too.
func ValidatePhysicalCluster(path *field.Path, pc *config.PhysicalClusterSpec) error {
	return validatePhysicalCluster(path, pc).ToAggregate()
}

func validatePhysicalCluster(pcPath *field.Path, pc *config.PhysicalClusterSpec) field.ErrorList {
	var allErrs field.ErrorList
	if len(pc.CellTypes) == 0 {
		allErrs = append(allErrs, field.Required(pcPath.Child("cellTypes"), "at least one cell type is required"))
	}
	for name, t := range pc.CellTypes {
		if t.TopologyKey == "" {
			continue
		}
		keyPath := pcPath.Child("cellTypes").Key(name).Child("topologyKey")
		for _, msg := range validation.IsQualifiedName(t.TopologyKey) {
			allErrs = append(allErrs, field.Invalid(keyPath, t.TopologyKey, "must be a node label key: "+msg))
		}
	}
	if len(pc.PhysicalCells) == 0 {
		allErrs = append(allErrs, field.Required(pcPath.Child("physicalCells"), "at least one physical cell is required"))
	}
	return allErrs
}

// validateSliceTopology: the node group labels are distinct label keys
// whose level names (the part after the last '.', which names the level's
// cell types) differ too.
func validateSliceTopology(path *field.Path, st *config.SliceTopologyArgs) field.ErrorList {
	var allErrs field.ErrorList
	keys := map[string]int{}
	levels := map[string]string{}
	for i, k := range st.NodeGroupLabels {
		p := path.Child("nodeGroupLabels").Index(i)
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			for _, msg := range msgs {
				allErrs = append(allErrs, field.Invalid(p, k, "must be a node label key: "+msg))
			}
			continue
		}
		if _, dup := keys[k]; dup {
			allErrs = append(allErrs, field.Duplicate(p, k))
			continue
		}
		keys[k] = i
		level := LevelName(k)
		if prev, ok := levels[level]; ok {
			allErrs = append(allErrs, field.Invalid(p, k, fmt.Sprintf("its level name %q (the key's name after its last '.') is also %s's: the derived cell type names would not say which level they are", level, prev)))
			continue
		}
		levels[level] = k
	}
	sizes := make([]string, 0, len(st.NodeGroupSizes))
	for k := range st.NodeGroupSizes {
		sizes = append(sizes, k)
	}
	sort.Strings(sizes)
	for _, k := range sizes {
		p := path.Child("nodeGroupSizes").Key(k)
		if _, ok := keys[k]; !ok {
			allErrs = append(allErrs, field.Invalid(p, k, "not a key of nodeGroupLabels: a size is of a level the derivation makes"))
		}
		if n := st.NodeGroupSizes[k]; n < 1 || n > 4096 {
			allErrs = append(allErrs, field.Invalid(p, n, "must be between 1 and 4096"))
		}
	}
	return allErrs
}

// LevelName is the name a node group label key gives its level in derived
// cell type names: the key's name part after its last '.'
// (topology.kubernetes.io/rack: rack; nvidia.com/gpu.clique: clique).
// plugins/slicetopology names the levels with it.
func LevelName(labelKey string) string {
	name := labelKey
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	return name
}
