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

// Package v1 holds the versioned (kubescheduler.config.k8s.io/v1) arguments
// of the HiveSched kube-scheduler plugin, with defaulting and conversion to
// the internal types in package config.
//
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/hivesched/hivesched/apis/config
// +k8s:defaulter-gen=TypeMeta
// +k8s:defaulter-gen-input=github.com/hivesched/hivesched/apis/config/v1
// +groupName=kubescheduler.config.k8s.io
package v1
