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
