package e2e

import (
	"bufio"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// TestKeepBackgroundSurvivesDroppedSSH: VS Code's Remote-SSH pattern
// through the gateway. A command started over OpenSSH's ssh launches a
// server with nohup and stays connected; the ssh is killed (a laptop
// that sleeps, a dropped network). With `agent connect --keep-background`
// the server lives on, as under sshd, for the editor's reconnect to
// find; the command itself still ends. Without the flag the session's end
// takes the server along, as the README says.
func TestKeepBackgroundSurvivesDroppedSSH(t *testing.T) {
	testenv.RequirePeer(t, "OpenSSH ssh", lookPath("ssh"))
	g := startGateway(t, "")
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("keep=%v", keep), func(t *testing.T) {
			id := "bg-default"
			if keep {
				id = "bg-keep"
			}
			args := []string{"connect", "--gateway", g.url, "--token", g.token("agent", id), "--host-id", id, "--state-dir", t.TempDir()}
			if keep {
				args = append(args, "--keep-background")
			}
			agent := start(t, "agent "+id, bin.agent, nil, args...)
			g.waitConnected(id, true, 30*time.Second)
			ctx := testCtx(t, 2*time.Minute)
			cfg := sshConfig(t, g, id, t.TempDir())
			// It prints once nohup has made its child sleep, ignoring
			// SIGHUP, and then the pids of the server and itself.
			cmd := exec.CommandContext(ctx, "ssh", "-F", cfg, id, `nohup sleep 300 >/dev/null 2>&1 &
until [ "$(cat /proc/$!/comm)" = sleep ]; do sleep 0.01; done
echo $! $$; exec sleep 600`)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var server, leader int
			line, err := bufio.NewReader(out).ReadString('\n')
			if _, serr := fmt.Sscan(line, &server, &leader); err != nil || serr != nil {
				t.Fatalf("ssh printed %q: %v %v\n%s", line, err, serr, agent.output())
			}
			t.Cleanup(func() { _ = syscall.Kill(server, syscall.SIGKILL); _ = syscall.Kill(leader, syscall.SIGKILL) })
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			// The command ends with its connection either way (it
			// ignores nothing): a hangup, then a kill.
			for end := time.Now().Add(time.Minute); testenv.Alive(leader); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("the command outlived its dropped ssh by a minute\n%s", agent.output())
				}
			}
			if keep {
				// The session's end, which would have killed the
				// server, came as the command was reaped, before this.
				time.Sleep(500 * time.Millisecond)
				if !testenv.Alive(server) {
					t.Fatalf("with --keep-background the nohup server ended with the dropped ssh\n%s", agent.output())
				}
				return
			}
			for end := time.Now().Add(time.Minute); testenv.Alive(server); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("without --keep-background the server outlived its session by a minute\n%s", agent.output())
				}
			}
		})
	}
}
