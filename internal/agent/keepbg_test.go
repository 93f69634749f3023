//go:build unix

package agent

import (
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hostgate/hostgate/internal/testenv"
)

// TestRunServeKeepBackground: `agent serve` lets what a command starts in
// the background outlive it only with --keep-background (or
// HOSTGATE_KEEP_BACKGROUND); by default a session's end kills all it
// started.
func TestRunServeKeepBackground(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  string
		keep bool
	}{
		{"default", nil, "", false},
		{"flag", []string{"--keep-background"}, "", true},
		{"environment", nil, "true", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("HOSTGATE_KEEP_BACKGROUND", tc.env)
			}
			cl, logs, done := serveStdio(t, tc.args...)
			s, err := cl.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			out, err := s.Output(`sleep 300 >/dev/null 2>&1 & echo $!`)
			pid, perr := strconv.Atoi(strings.TrimSpace(string(out)))
			if err != nil || perr != nil {
				t.Fatalf("output %q: %v\n%s", out, err, logs.String())
			}
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
			if testenv.Alive(pid) != tc.keep {
				t.Errorf("background process alive %v after its command, want %v", !tc.keep, tc.keep)
			}
			_ = cl.Close()
			if err := <-done; err != nil {
				t.Fatalf("RunServe: %v", err)
			}
		})
	}
}
