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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	schedschemev1 "k8s.io/kube-scheduler/config/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// SchemeGroupVersion is the kube-scheduler config group, version v1.
var SchemeGroupVersion = schema.GroupVersion{Group: schedconfig.GroupName, Version: "v1"}

var (
	// localSchemeBuilder extends the kube-scheduler's own v1 scheme builder,
	// so that the kube-scheduler's plugin-args conversion scheme knows
	// HiveSchedArgs.
	localSchemeBuilder = &schedschemev1.SchemeBuilder
	// AddToScheme adds the v1 plugin args types, defaults and conversions to a scheme.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&HiveSchedArgs{},
	)
	return nil
}

func init() {
	// RegisterConversions is registered by zz_generated.conversion.go itself.
	localSchemeBuilder.Register(addKnownTypes, RegisterDefaults)
}
