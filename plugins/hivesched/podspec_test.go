package hivesched

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/hivesched/hivesched/plugins/cellcore"
)

func TestNodeHealth(t *testing.T) {
	ready := func(s v1.ConditionStatus) *v1.Node {
		return &v1.Node{Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: s}}}}
	}
	require.Equal(t, cellcore.NodeHealthy, nodeHealth(ready(v1.ConditionTrue)))
	require.Equal(t, cellcore.NodeBad, nodeHealth(ready(v1.ConditionFalse)))
	require.Equal(t, cellcore.NodeBad, nodeHealth(ready(v1.ConditionUnknown)))
	require.Equal(t, cellcore.NodeUnknown, nodeHealth(&v1.Node{}))
	cordoned := ready(v1.ConditionTrue)
	cordoned.Spec.Unschedulable = true
	require.Equal(t, cellcore.NodeMaintenance, nodeHealth(cordoned))
	retired := ready(v1.ConditionTrue)
	retired.Labels = map[string]string{LabelHealth: "retired"}
	require.Equal(t, cellcore.NodeRetired, nodeHealth(retired))
}
