package affinitygroups

import (
	"fmt"
	"hash/fnv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// AnnotationGroupName keeps, on an AffinityGroup the scheduler created, the
// group's name as pods give it when that is not a valid object name (label
// values allow "Train_Job.V2", HiveD's names "alice~job1/default").
const AnnotationGroupName = "hivesched.io/affinity-group-name"

// ObjectName is the AffinityGroup object name of a group name: the name
// itself when it is a valid object name (a DNS subdomain), else a valid
// name made from it (lower case, other characters turned into "-", at most
// 253 characters) with a hash of the original, so that two groups never
// share an object. The original is kept in AnnotationGroupName.
func ObjectName(group string) string {
	if len(validation.IsDNS1123Subdomain(group)) == 0 {
		return group
	}
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(group) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash:
			b.WriteByte('-')
			dash = true
		}
	}
	h := fnv.New32a()
	h.Write([]byte(group))
	suffix := fmt.Sprintf("-%08x", h.Sum32())
	base := strings.Trim(b.String(), "-.")
	if max := validation.DNS1123SubdomainMaxLength - len(suffix); len(base) > max {
		base = strings.TrimRight(base[:max], "-.")
	}
	if base == "" {
		base = "group"
	}
	return base + suffix
}
