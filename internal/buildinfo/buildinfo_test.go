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
	if Version() == "" {
		t.Error("Version is empty")
	}
}
