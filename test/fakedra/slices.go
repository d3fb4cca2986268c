package main

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hivesched/hivesched/plugins/dra/dratest"
)

const (
	// kwokAnnotation marks the nodes kwok fakes (hack/local-up.sh): the only
	// nodes this fake driver publishes devices for.
	kwokAnnotation = "kwok.x-k8s.io/node"
	// gpuResource is the node capacity that says how many GPUs a fake node has.
	gpuResource v1.ResourceName = "nvidia.com/gpu"
	// productLabel is GPU Feature Discovery's label for the GPU model
	// (NVML's product name with dashes for spaces: Tesla-V100-SXM2-32GB);
	// the fake nodes carry it, and the devices' productName is its value
	// with the first dash a space again (Tesla V100-SXM2-32GB, Tesla T4).
	productLabel = "nvidia.com/gpu.product"
	// defaultProduct is the productName of a node without productLabel.
	defaultProduct = "Tesla V100-SXM2-32GB"
	// managedBy labels the slices this driver wrote, so that it finds (and
	// deletes) only its own.
	managedByLabel = "app.kubernetes.io/managed-by"
	managedBy      = "hivesched-fakedra"
)

// model is what NVIDIA's gpu-kubelet-plugin reads from NVML for a GPU
// model (cmd/gpu-kubelet-plugin/deviceinfo.go: productName, brand,
// architecture, cudaComputeCapability, memory), for the models the local
// clusters' nodes carry.
type model struct {
	product, brand, architecture, computeCapability, memory string
}

// models by GPU Feature Discovery's product label (NVML's product name with
// dashes for spaces). NVML names a GB200 NVL72 GPU "NVIDIA GB200", of the
// Blackwell architecture, compute capability 10.0, with 186 GiB of HBM3e
// (the size NVML reports is a little under the marketing 192 GB).
var models = map[string]model{
	"Tesla-V100-SXM2-32GB":  {product: "Tesla V100-SXM2-32GB", architecture: "Volta", computeCapability: "7.0.0", memory: "32Gi"},
	"Tesla-T4":              {product: "Tesla T4", architecture: "Turing", computeCapability: "7.5.0", memory: "16Gi"},
	"NVIDIA-H100-80GB-HBM3": {product: "NVIDIA H100 80GB HBM3", brand: "Nvidia", architecture: "Hopper", computeCapability: "9.0.0", memory: "80Gi"},
	"NVIDIA-GB200":          {product: "NVIDIA GB200", brand: "Nvidia", architecture: "Blackwell", computeCapability: "10.0.0", memory: "186Gi"},
}

// fakeNode reports whether node is a kwok fake node.
func fakeNode(node *v1.Node) bool {
	return node.Annotations[kwokAnnotation] == "fake"
}

// nodeGPUs is the GPU count of a node: its capacity nvidia.com/gpu.
func nodeGPUs(node *v1.Node) int {
	q, ok := node.Status.Capacity[gpuResource]
	if !ok {
		return 0
	}
	return int(q.Value())
}

// sliceFor is the ResourceSlice NVIDIA's gpu-kubelet-plugin would publish
// on node (dratest.Slice: one node-local slice in the pool named after the
// node, devices gpu-0..N-1, two PCIe roots), owned by the Node so that the
// garbage collector removes it with the node; nil for a node that is not a
// kwok fake node or has no GPUs. A T4 node's devices get a T4's
// architecture, compute capability and memory.
func sliceFor(node *v1.Node) *resourceapi.ResourceSlice {
	gpus := nodeGPUs(node)
	if !fakeNode(node) || gpus <= 0 {
		return nil
	}
	label := node.Labels[productLabel]
	m, known := models[label]
	if !known {
		m = model{product: strings.Replace(label, "-", " ", 1), architecture: "Volta", computeCapability: "7.0.0", memory: "32Gi"}
		if label == "" {
			m.product = defaultProduct
		}
	}
	s := dratest.Slice(node.Name, m.product, gpus)
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		d.Attributes["architecture"] = resourceapi.DeviceAttribute{StringValue: ptr.To(m.architecture)}
		d.Attributes["cudaComputeCapability"] = resourceapi.DeviceAttribute{VersionValue: ptr.To(m.computeCapability)}
		d.Capacity["memory"] = resourceapi.DeviceCapacity{Value: resource.MustParse(m.memory)}
		if m.brand != "" {
			d.Attributes["brand"] = resourceapi.DeviceAttribute{StringValue: ptr.To(m.brand)}
		}
	}
	s.Labels = map[string]string{managedByLabel: managedBy}
	if node.UID != "" {
		s.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			Controller: ptr.To(true),
		}}
	}
	return s
}

// sameDevices reports whether a published slice already says what want
// says (node, pool name, devices); the pool's generation is ours to bump.
func sameDevices(have, want *resourceapi.ResourceSlice) bool {
	return ptr.Deref(have.Spec.NodeName, "") == ptr.Deref(want.Spec.NodeName, "") &&
		have.Spec.Driver == want.Spec.Driver &&
		have.Spec.Pool.Name == want.Spec.Pool.Name &&
		equality.Semantic.DeepEqual(have.Spec.Devices, want.Spec.Devices) &&
		equality.Semantic.DeepEqual(have.OwnerReferences, want.OwnerReferences)
}

// deviceClass is NVIDIA's DeviceClass gpu.nvidia.com (dratest.DeviceClass).
func deviceClass() *resourceapi.DeviceClass {
	return dratest.DeviceClass()
}
