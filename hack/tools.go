//go:build tools

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

// Package tools pins modules that the project depends on before any
// non-test code imports them, so that "go mod tidy" keeps them in go.mod.
// The code generators are pinned with "tool" directives in go.mod instead.
package tools

import (
	_ "k8s.io/klog/v2"
	_ "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)
