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

// Package scheme registers the HiveSched plugin args in the kube-scheduler's
// configuration scheme. Importing it (for side effects or for Scheme/Codecs)
// lets KubeSchedulerConfiguration files carry a "HiveSched" pluginConfig.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/hivesched/hivesched/apis/config"
	configv1 "github.com/hivesched/hivesched/apis/config/v1"
)

var (
	// Scheme is the kube-scheduler's own configuration scheme, with the
	// HiveSched args added.
	Scheme = kubeschedulerscheme.Scheme

	// Codecs provides strict encoding and decoding for Scheme.
	Codecs = serializer.NewCodecFactory(Scheme, serializer.EnableStrict)
)

func init() {
	AddToScheme(Scheme)
}

// AddToScheme adds the internal and v1 HiveSched args types to a scheme.
func AddToScheme(scheme *runtime.Scheme) {
	utilruntime.Must(config.AddToScheme(scheme))
	utilruntime.Must(configv1.AddToScheme(scheme))
}
