// Command fakedra is a FAKE DRA driver for the local kwok cluster
// (hack/local-up.sh): it publishes, for every kwok fake node (annotated
// kwok.x-k8s.io/node=fake) with GPUs (capacity nvidia.com/gpu), the
// ResourceSlice NVIDIA's GPU driver would publish there (driver
// gpu.nvidia.com, pool named after the node, devices gpu-0..N-1 under two
// PCIe roots, NVIDIA's attributes: plugins/dra/dratest), and installs
// NVIDIA's DeviceClass gpu.nvidia.com. It reconciles on start and then
// every --interval: slices of new nodes are created, changed ones
// updated, those of nodes that are gone (or no longer fake) deleted.
//
// It is fake: there are no GPUs, and it never prepares a device. kwok runs
// no kubelet, so nothing calls a driver's NodePrepareResources: a pod whose
// claim hivesched allocated is "Running" on its fake node exactly as a pod
// with nvidia.com/gpu is. The fake nodes also keep advertising
// nvidia.com/gpu (device-plugin style) beside the slices, which a real node
// must not do with the same GPUs (README, "Try it").
//
//	fakedra --kubeconfig _output/local/kubeconfig            # reconcile every 10 s
//	fakedra --kubeconfig _output/local/kubeconfig --once     # once, then exit
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	interval := flag.Duration("interval", 10*time.Second, "time between reconciles")
	once := flag.Bool("once", false, "reconcile once and exit")
	flag.Parse()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		klog.Fatalf("kubeconfig: %v", err)
	}
	cfg.UserAgent = "hivesched-fakedra"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		klog.Fatalf("client: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	first := true
	for {
		n, err := reconcile(ctx, cs)
		switch {
		case err != nil:
			klog.Errorf("reconcile: %v", err)
			if *once {
				os.Exit(1)
			}
		case first:
			// hack/local-up.sh waits for this line.
			klog.Infof("reconciled: DeviceClass %s and %d ResourceSlices published", deviceClass().Name, n)
			first = false
		}
		if *once {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(*interval):
		}
	}
}

// reconcile makes the cluster's DeviceClass and fake slices what the nodes
// say; it returns how many slices are published.
func reconcile(ctx context.Context, cs kubernetes.Interface) (int, error) {
	class := deviceClass()
	if _, err := cs.ResourceV1().DeviceClasses().Get(ctx, class.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if _, err := cs.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return 0, fmt.Errorf("DeviceClass %s: %w", class.Name, err)
		}
		klog.Infof("created DeviceClass %s", class.Name)
	} else if err != nil {
		return 0, fmt.Errorf("DeviceClass %s: %w", class.Name, err)
	}

	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	have, err := cs.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{LabelSelector: managedByLabel + "=" + managedBy})
	if err != nil {
		return 0, err
	}
	published := map[string]*resourceapi.ResourceSlice{}
	for i := range have.Items {
		published[have.Items[i].Name] = &have.Items[i]
	}
	want := map[string]bool{}
	for i := range nodes.Items {
		s := sliceFor(&nodes.Items[i])
		if s == nil {
			continue
		}
		want[s.Name] = true
		if err := publish(ctx, cs, published[s.Name], s); err != nil {
			return 0, err
		}
	}
	for name := range published {
		if want[name] {
			continue
		}
		if err := cs.ResourceV1().ResourceSlices().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("ResourceSlice %s: %w", name, err)
		}
		klog.Infof("deleted ResourceSlice %s (its node is gone)", name)
	}
	return len(want), nil
}

// publish creates want, or updates have to it (the pool's generation one
// higher) if its devices differ.
func publish(ctx context.Context, cs kubernetes.Interface, have, want *resourceapi.ResourceSlice) error {
	switch {
	case have == nil:
		if _, err := cs.ResourceV1().ResourceSlices().Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("ResourceSlice %s: %w", want.Name, err)
		}
		klog.Infof("published ResourceSlice %s (%d devices on node %s)", want.Name, len(want.Spec.Devices), *want.Spec.NodeName)
	case !sameDevices(have, want):
		want.ResourceVersion = have.ResourceVersion
		want.Spec.Pool.Generation = have.Spec.Pool.Generation + 1
		if _, err := cs.ResourceV1().ResourceSlices().Update(ctx, want, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("ResourceSlice %s: %w", want.Name, err)
		}
		klog.Infof("updated ResourceSlice %s (%d devices on node %s)", want.Name, len(want.Spec.Devices), *want.Spec.NodeName)
	}
	return nil
}
