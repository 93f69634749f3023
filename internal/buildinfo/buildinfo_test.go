package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "3f1c2ab4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0"}, {Key: "vcs.time", Value: "2026-12-02T06:40:00Z"}, {Key: "vcs.modified", Value: "false"}},
			"3f1c2ab4d5e6 2026-12-02T06:40:00Z go1.26.0"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "3f1c2ab4d5e6f7a8"}, {Key: "vcs.modified", Value: "true"}},
			"3f1c2ab4d5e6+dirty go1.26.0"},
		{nil, "unknown commit go1.26.0"},
	} {
		if got := version(&debug.BuildInfo{GoVersion: "go1.26.0", Settings: tc.settings}); got != tc.want {
			t.Errorf("version(%v) = %q, want %q", tc.settings, got, tc.want)
		}
	}
	const pseudo = "v0.0.0-20261205231110-e60e185aa1b2"
	for _, tc := range []struct {
		what string
		bi   debug.BuildInfo
		want string
	}{
		{"go install …@" + pseudo, debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: pseudo}}, pseudo + " go1.26.0"},
		{"go install …@v1.2.3", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "v1.2.3"}}, "v1.2.3 go1.26.0"},
		{"another module's build requiring v1.2.3", debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "(devel)"},
			Deps: []*debug.Module{{Path: "golang.org/x/sys", Version: "v0.50.0"}, {Path: modulePath, Version: "v1.2.3"}}}, "v1.2.3 go1.26.0"},
		{"another module's build replacing it by a clone", debug.BuildInfo{Main: debug.Module{Path: "example.com/app", Version: "(devel)"},
			Deps: []*debug.Module{{Path: modulePath, Version: "v1.2.3", Replace: &debug.Module{Path: "../hostgate"}}}}, "unknown commit go1.26.0"},
		{"a build in the module without VCS", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}}, "unknown commit go1.26.0"},
		{"a build in the module with VCS", debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "3f1c2ab4d5e6f7a8"}}}, "3f1c2ab4d5e6 go1.26.0"},
	} {
		tc.bi.GoVersion = "go1.26.0"
		if got := version(&tc.bi); got != tc.want {
			t.Errorf("%s: version = %q, want %q", tc.what, got, tc.want)
		}
	}
	if Version() == "" {
		t.Error("Version is empty")
	}
}
