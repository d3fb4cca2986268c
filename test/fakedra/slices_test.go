package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func kwokNode(name string, gpus int, labels map[string]string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: labels,
		Annotations: map[string]string{kwokAnnotation: "fake"}}}
	n.Status.Capacity = v1.ResourceList{gpuResource: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}
	return n
}

func TestSliceForV100Node(t *testing.T) {
	s := sliceFor(kwokNode("gpu-a0", 8, map[string]string{productLabel: "Tesla-V100-SXM2-32GB"}))
	require.NotNil(t, s)
	require.Equal(t, "gpu.nvidia.com", s.Spec.Driver)
	require.Equal(t, "gpu-a0", s.Spec.Pool.Name)
	require.Equal(t, "gpu-a0", *s.Spec.NodeName)
	require.Equal(t, managedBy, s.Labels[managedByLabel])
	require.Len(t, s.OwnerReferences, 1)
	require.Equal(t, "Node", s.OwnerReferences[0].Kind)
	require.Equal(t, types.UID("uid-gpu-a0"), s.OwnerReferences[0].UID)
	require.Len(t, s.Spec.Devices, 8)
	roots := map[string]int{}
	for i, d := range s.Spec.Devices {
		require.Equal(t, "gpu-"+string(rune('0'+i)), d.Name)
		require.Equal(t, defaultProduct, *d.Attributes["productName"].StringValue)
		require.Equal(t, "gpu", *d.Attributes["type"].StringValue)
		roots[*d.Attributes["resource.kubernetes.io/pcieRoot"].StringValue]++
	}
	require.Equal(t, map[string]int{"pci0000:17": 4, "pci0000:85": 4}, roots)
}

func TestSliceForT4Node(t *testing.T) {
	s := sliceFor(kwokNode("t4-0", 4, map[string]string{productLabel: "Tesla-T4"}))
	require.NotNil(t, s)
	require.Len(t, s.Spec.Devices, 4)
	d := s.Spec.Devices[3]
	require.Equal(t, "gpu-3", d.Name)
	require.Equal(t, "Tesla T4", *d.Attributes["productName"].StringValue)
	require.Equal(t, "Turing", *d.Attributes["architecture"].StringValue)
	require.Equal(t, "pci0000:85", *d.Attributes["resource.kubernetes.io/pcieRoot"].StringValue)
	mem := d.Capacity["memory"].Value
	require.Equal(t, "16Gi", mem.String())
}

func TestSliceForSkipsOtherNodes(t *testing.T) {
	other := kwokNode("real", 8, nil)
	other.Annotations = nil
	require.Nil(t, sliceFor(other), "a node kwok does not fake")
	require.Nil(t, sliceFor(kwokNode("cpu", 0, nil)), "a node without GPUs")
}

func TestSameDevices(t *testing.T) {
	a, b := sliceFor(kwokNode("gpu-a0", 8, nil)), sliceFor(kwokNode("gpu-a0", 8, nil))
	b.Spec.Pool.Generation = 7
	b.ResourceVersion = "42"
	require.True(t, sameDevices(a, b), "generation and resource version are not the devices")
	require.False(t, sameDevices(a, sliceFor(kwokNode("gpu-a0", 4, nil))))
	renewed := kwokNode("gpu-a0", 8, nil)
	renewed.UID = "uid-new"
	require.False(t, sameDevices(a, sliceFor(renewed)), "a re-created node owns its slice")
}

func TestDeviceClass(t *testing.T) {
	c := deviceClass()
	require.Equal(t, "gpu.nvidia.com", c.Name)
	require.Contains(t, c.Spec.Selectors[0].CEL.Expression, "device.driver == 'gpu.nvidia.com'")
}

// TestSliceForGB200AndH100Nodes (issue 45): the GB200-shaped cluster's
// trays and H100 nodes publish what NVIDIA's driver reads from NVML for
// those models.
func TestSliceForGB200AndH100Nodes(t *testing.T) {
	s := sliceFor(kwokNode("gb-a00", 4, map[string]string{productLabel: "NVIDIA-GB200", "nvidia.com/gpu.clique": "x.1"}))
	require.NotNil(t, s)
	require.Len(t, s.Spec.Devices, 4)
	for _, d := range s.Spec.Devices {
		require.Equal(t, "NVIDIA GB200", *d.Attributes["productName"].StringValue)
		require.Equal(t, "Blackwell", *d.Attributes["architecture"].StringValue)
		require.Equal(t, "10.0.0", *d.Attributes["cudaComputeCapability"].VersionValue)
		mem := d.Capacity["memory"].Value
		require.Equal(t, "186Gi", mem.String())
	}
	h := sliceFor(kwokNode("h100-0", 8, map[string]string{productLabel: "NVIDIA-H100-80GB-HBM3"}))
	require.NotNil(t, h)
	require.Len(t, h.Spec.Devices, 8)
	require.Equal(t, "NVIDIA H100 80GB HBM3", *h.Spec.Devices[7].Attributes["productName"].StringValue)
	require.Equal(t, "Hopper", *h.Spec.Devices[7].Attributes["architecture"].StringValue)
}
