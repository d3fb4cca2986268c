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
	"k8s.io/apimachinery/pkg/conversion"

	"github.com/hivesched/hivesched/apis/config"
)

// Convert_v1_HiveSchedArgs_To_config_HiveSchedArgs converts the generated
// fields and the optional dra section (a pointer here, a value inside).
func Convert_v1_HiveSchedArgs_To_config_HiveSchedArgs(in *HiveSchedArgs, out *config.HiveSchedArgs, s conversion.Scope) error { //nolint:revive,stylecheck // name required by conversion-gen
	if err := autoConvert_v1_HiveSchedArgs_To_config_HiveSchedArgs(in, out, s); err != nil {
		return err
	}
	out.DRA = config.DRAArgs{}
	if in.DRA != nil {
		return Convert_v1_DRAArgs_To_config_DRAArgs(in.DRA, &out.DRA, s)
	}
	return nil
}

// Convert_config_HiveSchedArgs_To_v1_HiveSchedArgs converts the generated
// fields and the dra section.
func Convert_config_HiveSchedArgs_To_v1_HiveSchedArgs(in *config.HiveSchedArgs, out *HiveSchedArgs, s conversion.Scope) error { //nolint:revive,stylecheck // name required by conversion-gen
	if err := autoConvert_config_HiveSchedArgs_To_v1_HiveSchedArgs(in, out, s); err != nil {
		return err
	}
	out.DRA = &DRAArgs{}
	return Convert_config_DRAArgs_To_v1_DRAArgs(&in.DRA, out.DRA, s)
}
