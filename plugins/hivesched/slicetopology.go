package hivesched

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/hivesched/hivesched/apis/config"
	"github.com/hivesched/hivesched/apis/config/validation"
	"github.com/hivesched/hivesched/plugins/slicetopology"
)

// listTopology is the physical cluster derived from the Nodes and the
// driver's ResourceSlices (physicalClusterFrom ResourceSlices), listed from
// the API server once, in New (New may call the API; the scheduling path
// never does), with the inputs it was derived from. Later changes reach
// the core through the informers (topology.go).
func listTopology(ctx context.Context, args *config.HiveSchedArgs, cs kubernetes.Interface) (topoInputs, config.PhysicalClusterSpec, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return topoInputs{}, config.PhysicalClusterSpec{}, fmt.Errorf("physicalClusterFrom ResourceSlices: listing nodes: %w", err)
	}
	// Only the driver's slices: a cluster's other drivers may publish many.
	slices, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.driver", args.DRA.Driver).String()})
	if err != nil {
		return topoInputs{}, config.PhysicalClusterSpec{}, fmt.Errorf("physicalClusterFrom ResourceSlices: listing the ResourceSlices of driver %s: %w", args.DRA.Driver, err)
	}
	nodePtrs := make([]*v1.Node, len(nodes.Items))
	for i := range nodes.Items {
		nodePtrs[i] = &nodes.Items[i]
	}
	slicePtrs := make([]*resourceapi.ResourceSlice, len(slices.Items))
	for i := range slices.Items {
		slicePtrs[i] = &slices.Items[i]
	}
	cfg, err := deriveCluster(klog.FromContext(ctx), args, nodePtrs, slicePtrs)
	return newTopoInputs(nodePtrs, slicePtrs, args.DRA.Driver), cfg, err
}

// deriveCluster builds the physical cluster from nodes and slices, logs
// the nodes left out and ungrouped, and checks it as the args' own would be.
func deriveCluster(logger klog.Logger, args *config.HiveSchedArgs, nodes []*v1.Node, slices []*resourceapi.ResourceSlice) (config.PhysicalClusterSpec, error) {
	opts := slicetopology.Options{Driver: args.DRA.Driver}
	if args.SliceTopology != nil {
		opts.NodeGroupLabels = args.SliceTopology.NodeGroupLabels
		opts.NodeGroupSizes = args.SliceTopology.NodeGroupSizes
	}
	res, err := slicetopology.Build(opts, nodes, slices)
	if err != nil {
		return config.PhysicalClusterSpec{}, fmt.Errorf("physicalClusterFrom ResourceSlices: %w", err)
	}
	for _, s := range res.Skipped {
		logger.Info("node left out of the physical cluster derived from ResourceSlices", "node", s.Node, "reason", s.Reason)
	}
	for _, s := range res.Ungrouped {
		logger.V(2).Info("node not grouped in the physical cluster derived from ResourceSlices", "node", s.Node, "reason", s.Reason)
	}
	if len(res.Nodes) == 0 {
		why := make([]string, 0, len(res.Skipped))
		for _, s := range res.Skipped {
			why = append(why, s.Node+": "+s.Reason)
		}
		if len(why) == 0 {
			why = append(why, "no node publishes a ResourceSlice of the driver")
		}
		return config.PhysicalClusterSpec{}, fmt.Errorf("physicalClusterFrom ResourceSlices: no node's ResourceSlices of driver %s give cells (%s); the scheduler needs at least one (it starts again, and reads them again, after the driver publishes them)",
			args.DRA.Driver, strings.Join(why, "; "))
	}
	if err := validation.ValidatePhysicalCluster(nil, &res.PhysicalCluster); err != nil {
		return config.PhysicalClusterSpec{}, fmt.Errorf("physicalClusterFrom ResourceSlices: the derived physical cluster: %w", err)
	}
	types := make([]string, 0, len(res.PhysicalCluster.CellTypes))
	for t := range res.PhysicalCluster.CellTypes {
		types = append(types, t)
	}
	if len(res.Absent) > 0 {
		// Domains short of their nodeGroupSizes: the padding is absent
		// nodes, lost capacity (markAbsent).
		logger.Info("groups short of their nodeGroupSizes in the physical cluster derived from ResourceSlices: padded with absent nodes, counted as lost capacity",
			"absentNodes", res.Absent)
	}
	logger.Info("physical cluster derived from ResourceSlices", "driver", args.DRA.Driver, "nodes", len(res.Nodes),
		"topCells", len(res.PhysicalCluster.PhysicalCells), "cellTypes", types, "leftOut", len(res.Skipped))
	return res.PhysicalCluster, nil
}
