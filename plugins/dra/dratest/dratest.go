// Package dratest builds the DRA objects NVIDIA's GPU driver publishes and
// installs, for tests: ResourceSlices shaped as its gpu-kubelet-plugin
// publishes them (github.com/NVIDIA/k8s-dra-driver-gpu, now
// kubernetes-sigs/dra-driver-nvidia-gpu: cmd/gpu-kubelet-plugin
// deviceinfo.go and driver.go; docs/plugin.md "DRA" cites the lines), its
// DeviceClass gpu.nvidia.com, and claims and templates asking for GPUs.
package dratest

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Driver and Class are NVIDIA's names.
const (
	Driver = "gpu.nvidia.com"
	Class  = "gpu.nvidia.com"
)

// Slice is the ResourceSlice NVIDIA's kubelet plugin publishes for a node
// with gpus whole GPUs (DynamicMIG off, its default): one node-local slice,
// pool named after the node, devices gpu-<minor> with the driver's
// attributes (type gpu, uuid, productName, brand, architecture, version
// attributes) and the standard PCI ones; the first half of the GPUs under
// one PCIe root, the second half under another (two CPU sockets' root
// complexes); capacity memory.
func Slice(node, product string, gpus int) *resourceapi.ResourceSlice {
	devs := make([]resourceapi.Device, gpus)
	for i := range devs {
		root := "pci0000:17"
		bus := 0x18 + i
		if i >= gpus/2 {
			root = "pci0000:85"
			bus = 0x86 + i - gpus/2
		}
		devs[i] = resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type":                            {StringValue: ptr.To("gpu")},
				"uuid":                            {StringValue: ptr.To(fmt.Sprintf("GPU-%s-%08x", node, i))},
				"productName":                     {StringValue: ptr.To(product)},
				"brand":                           {StringValue: ptr.To("Tesla")},
				"architecture":                    {StringValue: ptr.To("Volta")},
				"cudaComputeCapability":           {VersionValue: ptr.To("7.0.0")},
				"driverVersion":                   {VersionValue: ptr.To("570.133.20")},
				"cudaDriverVersion":               {VersionValue: ptr.To("12.8.0")},
				"resource.kubernetes.io/pciBusID": {StringValue: ptr.To(fmt.Sprintf("0000:%02x:00.0", bus))},
				"resource.kubernetes.io/pcieRoot": {StringValue: ptr.To(root)},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: resource.MustParse("32Gi")},
			},
		}
	}
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + Driver + "-slice"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   Driver,
			Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
			Devices:  devs,
		},
	}
}

// DeviceClass is NVIDIA's gpu.nvidia.com class (helm chart
// deviceclass-gpu.yaml, resource.k8s.io/v1), extendedResourceName
// included.
func DeviceClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: Class},
		Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}},
			ExtendedResourceName: ptr.To("nvidia.com/gpu"),
		},
	}
}

// ClaimSpec asks for count GPUs of the class in one request "gpus".
func ClaimSpec(count int64) resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name:    "gpus",
		Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: Class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count},
	}}}}
}

// Claim is a claim of count GPUs.
func Claim(namespace, name string, count int64) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: ClaimSpec(count)}
}

// Template is a ResourceClaimTemplate of count GPUs.
func Template(namespace, name string, count int64) *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: ClaimSpec(count)}}
}

// UseClaim makes the pod's containers use a claim (resourceClaimName) or a
// template's claim (template true) under the pod claim name "gpus".
func UseClaim(pod *v1.Pod, name string, template bool) {
	pc := v1.PodResourceClaim{Name: "gpus"}
	if template {
		pc.ResourceClaimTemplateName = ptr.To(name)
	} else {
		pc.ResourceClaimName = ptr.To(name)
	}
	pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, pc)
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Resources.Claims = append(pod.Spec.Containers[i].Resources.Claims, v1.ResourceClaim{Name: "gpus"})
	}
}
