package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRuntimeDeadlineSurvivesGatewaySIGKILL: the runtime limit does not
// depend on the gateway being alive. The gateway is killed with SIGKILL
// right after provisioning (no Terminate, no timer left to fire); the
// container still ends at its deadline — its main process is the
// in-container sleep and Docker removes it (AutoRemove).
func TestRuntimeDeadlineSurvivesGatewaySIGKILL(t *testing.T) {
	g, c, image := execGateway(t)
	ctx := testCtx(t, 3*time.Minute)
	req := execRequest(image)
	req.Resources.RuntimeMs = 8000
	// Killed before its own deadline timer fires, which would destroy the
	// container itself.
	e := provisionShort(t, ctx, c, req, 4*time.Second)
	id := containerOf(t, e.ExecutionID)
	g.kill()
	// Killing the gateway did not take the container with it.
	if out, err := exec.Command("docker", "inspect", "--format", "{{.State.Status}}", id).Output(); err != nil || strings.TrimSpace(string(out)) != "running" {
		t.Fatalf("container %s right after the gateway died: %q %v, want running", id, out, err)
	}

	deadline := time.Now().Add(2 * time.Minute)
	for {
		// docker inspect fails once the container is gone.
		if err := exec.Command("docker", "inspect", "--format", "{{.State.Status}}", id).Run(); err != nil {
			break
		}
		if time.Now().After(deadline) {
			_ = exec.Command("docker", "rm", "-f", id).Run()
			t.Fatalf("container %s still exists 2 min after its %d ms runtime with the gateway dead", id, e.Resources.RuntimeMs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestSandboxCannotStopOrKillItsDeadline: the gateway's sandboxes keep
// their runtime deadline in the agent binary as PID 1, which the
// sandbox's own code, as its uid, can neither kill nor stop: with the
// deadline a shell and its sleep under docker-init, killall -9 sleep
// ended the sandbox at once, and kill -STOP of the sleep kept it past its
// deadline while no gateway ran; with the agent as PID 1 of the
// sandbox's uid, kill -TERM 1 (which it honours for docker stop) did: it
// runs under a uid of its own now, which the sandbox cannot signal. (kill
// -1 would hit the in-container agent serving the commands too:
// dockerhost's tests send those.)
func TestSandboxCannotStopOrKillItsDeadline(t *testing.T) {
	g, c, image := execGateway(t)
	ctx := testCtx(t, 3*time.Minute)
	req := execRequest(image)
	req.Resources.RuntimeMs = 15000
	e := provisionShort(t, ctx, c, req, 8*time.Second)
	id := containerOf(t, e.ExecutionID)
	out := sh(t, ctx, c, e.ExecutionID, `tr '\0' ' ' </proc/1/cmdline; echo; for s in STOP KILL TERM INT HUP QUIT ABRT SEGV USR1 TSTP; do kill -$s 1 2>/dev/null && echo "kill -$s 1 allowed"; done; killall -9 sleep; echo sent`)
	if !strings.HasPrefix(out, "/opt/hostgate/agent __hostgate_deadline ") || !strings.HasSuffix(out, "sent\n") || strings.Contains(out, "allowed") {
		t.Fatalf("PID 1 and the kills: %q, want the agent's deadline", out)
	}
	if out := sh(t, ctx, c, e.ExecutionID, `echo alive`); out != "alive\n" {
		t.Fatalf("after the kills: %q", out)
	}
	g.kill()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		// docker inspect fails once the container is gone.
		if err := exec.Command("docker", "inspect", "--format", "{{.State.Status}}", id).Run(); err != nil {
			break
		}
		if time.Now().After(deadline) {
			_ = exec.Command("docker", "rm", "-f", id).Run()
			t.Fatalf("container %s still exists 2 min after its %d ms runtime with the gateway dead", id, e.Resources.RuntimeMs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
