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
// "3f1c2ab4d5e6 2026-12-02T06:40:00Z go1.26.0". `go install …@version`
// records no VCS information but hostgate's module version (a commit's
// pseudo-version holds its time and 12 hex digits), which it says instead.
// Without either (go run, a build from a tree without .git or with
// -buildvcs=false) it says "unknown commit".
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
	case rev == "" && moduleVersion(bi) != "":
		parts = append(parts, moduleVersion(bi))
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

// modulePath is hostgate's module: the main module of a binary built by
// `go install …@version`, a dependency of one another module builds.
const modulePath = "github.com/hostgate/hostgate"

// moduleVersion is the version of hostgate's module the binary was built
// from, as the go command recorded it, or "" where that names no release
// or commit: a build in the module itself ("(devel)") or against a
// replacement.
func moduleVersion(bi *debug.BuildInfo) string {
	m := &bi.Main
	if m.Path != modulePath {
		m = nil
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				m = d
				break
			}
		}
	}
	if m == nil || m.Replace != nil || m.Version == "(devel)" {
		return ""
	}
	return m.Version
}
