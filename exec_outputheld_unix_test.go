//go:build unix

package hostgate_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/sshdtest"
	"github.com/hostgate/hostgate/sshlayer"
)

// heldOutputCommand is a command that prints hi and exits at once,
// leaving a sleep in the background holding its stdout and stderr, as
// `sleep 3600 & echo hi` does; the sleep is killed at t's cleanup.
func heldOutputCommand(t *testing.T) []string {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "holder.pid")
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return []string{"sh", "-c", `sleep 3600 & echo $! >"$1"; echo hi`, "sh", pidFile}
}

// TestExecEndsWhenOutputHeld: `sleep 3600 & echo hi` over OpenSSH's sshd,
// which keeps the session open while the sleep holds the command's
// output (as OpenSSH's ssh waits, for as long), held Exec until its ctx
// ended, and Exec then failed with ctx's error. Now it returns once the
// output has been quiet for a while after the host told the exit: hi,
// exit 0, and OutputCut saying what the sleep may write later is not
// there. Over sshlayer's server, which ends the session's background
// processes with the command, the same command returns hi, nothing cut.
func TestExecEndsWhenOutputHeld(t *testing.T) {
	t.Cleanup(hostgate.SetOutputHeldGrace(2 * time.Second))
	for _, over := range []string{"sshd", "sshlayer"} {
		t.Run(over, func(t *testing.T) {
			var h *hostgate.Host
			if over == "sshd" {
				srv := sshdtest.Start(t, sshdtest.Options{})
				h = hostgate.New(hostgate.Info{Kind: "machine"}, sshConnect(srv.Addr(), sshlayer.Auth{User: "root", PrivateKey: srv.UserKey, HostKey: srv.HostKey}))
				t.Cleanup(func() { _ = h.Close() })
			} else {
				h = sshHost(t)
			}
			// A guard against a hang, not a timing.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := h.Exec(ctx, heldOutputCommand(t), hostgate.ExecOptions{})
			if ctx.Err() != nil {
				t.Fatalf("Exec still waiting a minute after the command exited, its output held by a process it left: %v", err)
			}
			if err != nil {
				t.Fatalf("Exec: %v; want the command's result", err)
			}
			if string(res.Stdout) != "hi\n" || res.ExitCode != 0 {
				t.Errorf("Exec: stdout %q, exit %d; want hi and 0", res.Stdout, res.ExitCode)
			}
			if want := over == "sshd"; res.OutputCut != want {
				t.Errorf("OutputCut %v; want %v", res.OutputCut, want)
			}
		})
	}
}
