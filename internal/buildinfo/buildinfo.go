// Package buildinfo says which build a binary is: the commit it was built
// from, as `go build` records it, so that an operator can match a running
// gateway or agent against the README's notes, which name commits.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Version is the binary's commit (12 hex digits, "+dirty" when built from
// a modified tree), its commit time and its Go version, e.g.
// "3f1c2ab4d5e6 2026-12-02T06:40:00Z go1.26.0". Without VCS information
// (go run, a build outside the repository) it says "unknown commit".
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown build"
	}
	return version(bi)
}

func version(bi *debug.BuildInfo) string {
	var rev, at string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	parts := []string{}
	switch {
	case rev == "":
		parts = append(parts, "unknown commit")
	default:
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "+dirty"
		}
		parts = append(parts, rev)
		if at != "" {
			parts = append(parts, at)
		}
	}
	return strings.Join(append(parts, bi.GoVersion), " ")
}
