// Package english words lists in the plugin's messages.
package english

import "strings"

// JoinNames lists names as "a", "a and b", "a, b and c" ("no group" if
// there are none).
func JoinNames(names []string) string {
	switch len(names) {
	case 0:
		return "no group"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
