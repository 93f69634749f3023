package e2e

import (
	"context"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/client"
)

// TestSetTimeoutMovesBothDeadlines: SetTimeout (E2B's setTimeout) moves an
// execution's deadline to now + d, both of them: the container outlives its
// provisioned runtime with no gateway running (its in-container deadline
// moved), a restarted gateway adopts the new deadline (kept in the
// container's name), and the container ends at it by itself, with no
// gateway. No sandbox process can move it: the deadline's file is uid 0's.
// More than the gateway's maximum is refused naming runtimeMs.
func TestSetTimeoutMovesBothDeadlines(t *testing.T) {
	g, c, image := execGateway(t)
	ctx := testCtx(t, 5*time.Minute)
	req := execRequest(image)
	req.Resources.RuntimeMs = 8000
	e := provisionShort(t, ctx, c, req, 5*time.Second)
	cid := containerOf(t, e.ExecutionID)
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", cid).Run() })

	if _, err := c.SetTimeout(ctx, e.ExecutionID, 25*time.Hour); apiErr(err) == nil || apiErr(err).Status != http.StatusBadRequest || !strings.HasPrefix(apiErr(err).Message, "runtimeMs: want 1 to ") {
		t.Fatalf("SetTimeout over the maximum: %v, want 400 naming runtimeMs", err)
	}
	// now + 22 s for a now between the call and its answer (a second's
	// room for the answer's rounding), whatever the call took: 7 s of
	// room after the answer could pass on a loaded machine.
	called := time.Now()
	moved, err := c.SetTimeout(ctx, e.ExecutionID, 22*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	answered := time.Now()
	if moved.ExpiresAt.Before(called.Add(21*time.Second)) || moved.ExpiresAt.After(answered.Add(23*time.Second)) || !moved.ExpiresAt.After(e.ExpiresAt) {
		t.Fatalf("SetTimeout: expiresAt %v, want 22 s after a time between %v and %v; provisioned %v", moved.ExpiresAt, called, answered, e.ExpiresAt)
	}
	t.Logf("SetTimeout took %v", answered.Sub(called).Round(time.Millisecond))
	if got, err := c.Execution(ctx, e.ExecutionID); err != nil || !got.ExpiresAt.Equal(moved.ExpiresAt) {
		t.Fatalf("GET after SetTimeout: %+v %v", got, err)
	}
	// The sandbox cannot move it itself.
	res, err := c.Exec(ctx, e.ExecutionID, client.ExecRequest{Command: "/bin/sh", Args: []string{"-c", "echo 99999 > /dev/shm/.hostgate/extra || rm -rf /dev/shm/.hostgate || exit 9; cat /dev/shm/.hostgate/extra"}, TimeoutMs: 10000})
	if err != nil || res.ExitCode != 9 {
		t.Fatalf("a sandbox process moving its own deadline: %+v %v, want refused", res, err)
	}

	// No gateway: only the container's own deadline runs.
	g.stop()
	time.Sleep(time.Until(e.ExpiresAt) + 4*time.Second)
	state := func() string {
		out, _ := exec.Command("docker", "inspect", "-f", "{{.State.Running}} {{.Name}}", cid).CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	if s := state(); !strings.HasPrefix(s, "true /hostgate-"+e.ExecutionID+"--"+strconv.FormatInt(moved.ExpiresAt.Unix(), 10)+".") {
		t.Fatalf("container 4 s past its provisioned runtime: %q, want running, its name the new deadline", s)
	}
	g.restart("--docker", "on", "--agent-binary", bin.agent)
	c2, err := client.New(g.url, g.admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c2.Execution(ctx, e.ExecutionID)
	if err != nil || got.ExpiresAt.Unix() != moved.ExpiresAt.Unix() {
		t.Fatalf("adopted: %+v %v, want expiresAt %v", got, err, moved.ExpiresAt)
	}
	g.stop()
	// The container's own deadline: at most 3 s after the host's (whole
	// seconds, one of margin, a second read of an empty file).
	for time.Now().Before(moved.ExpiresAt.Add(-2 * time.Second)) {
		if s := state(); !strings.HasPrefix(s, "true ") {
			t.Fatalf("container %v before its new deadline: %q, want running", time.Until(moved.ExpiresAt), s)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for end := moved.ExpiresAt.Add(15 * time.Second); strings.HasPrefix(state(), "true "); time.Sleep(250 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("container still running 15 s after its new deadline, with no gateway: %q", state())
		}
	}
	t.Logf("the container ended by itself %v after the new deadline", time.Since(moved.ExpiresAt).Round(100*time.Millisecond))
	g.restart("--docker", "on", "--agent-binary", bin.agent)
	c3, err := client.New(g.url, g.admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Removed (AutoRemove) while no gateway ran, it left nothing to say
	// how it ended: 404, as for any execution that ended so.
	if _, err := c3.Execution(context.Background(), e.ExecutionID); apiErr(err) == nil || apiErr(err).Status != http.StatusNotFound && apiErr(err).Status != http.StatusGone {
		t.Fatalf("after its deadline: %v, want it ended", err)
	}
}
