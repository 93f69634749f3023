//go:build unix

package agent

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/sshlayer"
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
			dir := t.TempDir()
			client := serveKey(t)
			keys := filepath.Join(dir, "keys")
			if err := os.WriteFile(keys, ssh.MarshalAuthorizedKey(client.PublicKey()), 0o600); err != nil {
				t.Fatal(err)
			}
			gwSide, agentSide := serveTCPPair(t)
			ctx, cancel := context.WithTimeout(context.Background(), serveWait)
			defer cancel()
			var logs serveLogBuffer
			done := make(chan error, 1)
			args := append([]string{"--stdio", "--authorized-keys", keys, "--state-dir", dir}, tc.args...)
			go func() { done <- RunServe(ctx, args, &ServeIO{Conn: agentSide, Stderr: &logs}) }()
			hk, err := sshlayer.LoadOrCreateHostKey(filepath.Join(dir, HostKeyFile))
			if err != nil {
				t.Fatal(err)
			}
			cl := serveSSHClient(t, gwSide, hk.PublicKey(), client)
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
