package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/client"
)

// TestExecutionEndSaysWhy: through the real gateway and Docker, an ended
// execution answers 410 saying why and when it ended (reason and endedAt,
// the client's APIError.Reason and EndedAt), also after a gateway restart,
// and a provision that names an ended id is refused with 409 rather than
// making a new sandbox under it (audit31: "has ended" alone, and 201).
func TestExecutionEndSaysWhy(t *testing.T) {
	g, c, image := execGateway(t)
	ctx := testCtx(t, 5*time.Minute)
	suffix := strings.ReplaceAll(t.Name(), "/", "-") + "-" + time.Now().Format("150405.000000")
	wantEnded := func(c *client.Client, id, reason string, near time.Time) *client.APIError {
		t.Helper()
		_, err := c.Execution(ctx, id)
		ae := apiErr(err)
		if ae == nil || ae.Status != http.StatusGone || ae.Reason != reason || ae.EndedAt.Sub(near).Abs() > time.Minute ||
			!strings.Contains(ae.Message, "ended") {
			var got string
			if ae != nil {
				got = fmt.Sprintf(" (reason %q, endedAt %v)", ae.Reason, ae.EndedAt)
			}
			t.Fatalf("GET %s: %v%s, want 410 with reason %s near %v", id, err, got, reason, near)
		}
		return ae
	}
	wantRefused := func(c *client.Client, req client.ProvisionRequest, reason string) {
		t.Helper()
		e, err := c.Provision(ctx, req)
		if err == nil {
			_ = c.Terminate(context.Background(), e.ExecutionID)
		}
		ae := apiErr(err)
		if ae == nil || ae.Status != http.StatusConflict || ae.Reason != reason || !strings.Contains(ae.Message, req.ExecutionID) ||
			!strings.Contains(ae.Message, "not reused") {
			t.Fatalf("provision of the ended id %s: %v, want 409 saying ids are not reused, reason %s", req.ExecutionID, err, reason)
		}
	}

	// An abort: the caller's ctx ends before the answer.
	aborted := execRequest(image)
	aborted.ExecutionID = "abort-" + suffix
	provision(t, ctx, c, aborted)
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := c.Exec(actx, aborted.ExecutionID, client.ExecRequest{Command: "sleep", Args: []string{"60"}, TimeoutMs: 120_000})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("exec cut by its ctx: %v", err)
	}
	abortedAt := time.Now()
	// The gateway sees the caller gone a little later; until then the
	// execution lives.
	for end := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := c.Execution(ctx, aborted.ExecutionID); err != nil {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the aborted execution still lives after a minute")
		}
	}
	ae := wantEnded(c, aborted.ExecutionID, "aborted", abortedAt)
	if !strings.Contains(ae.Message, "went away") {
		t.Fatalf("abort in words: %q", ae.Message)
	}
	wantRefused(c, aborted, "aborted")

	// An output flood.
	flood := execRequest(image)
	flood.ExecutionID = "flood-" + suffix
	provision(t, ctx, c, flood)
	_, err = c.Exec(ctx, flood.ExecutionID, client.ExecRequest{Command: "/bin/sh", Args: []string{"-c", "yes"}, TimeoutMs: 60_000})
	if ae := apiErr(err); ae == nil || ae.Code != "output_limit" {
		t.Fatalf("flood: %v, want output_limit", err)
	}
	wantEnded(c, flood.ExecutionID, "output_limit", time.Now())

	// A DELETE, then a restart: the reason and the time stay.
	deleted := execRequest(image)
	deleted.ExecutionID = "delete-" + suffix
	provision(t, ctx, c, deleted)
	if err := c.Terminate(ctx, deleted.ExecutionID); err != nil {
		t.Fatal(err)
	}
	before := wantEnded(c, deleted.ExecutionID, "terminated", time.Now())
	wantRefused(c, deleted, "terminated")

	g.stop()
	g.restart("--docker", "on", "--agent-binary", bin.agent, "--sandbox-image", image)
	c2, err := client.New(g.url, g.admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	after := wantEnded(c2, deleted.ExecutionID, "terminated", before.EndedAt)
	if !after.EndedAt.Equal(before.EndedAt.Truncate(time.Millisecond)) {
		t.Fatalf("endedAt after the restart %v, before %v", after.EndedAt, before.EndedAt)
	}
	wantEnded(c2, aborted.ExecutionID, "aborted", abortedAt)
	wantRefused(c2, deleted, "terminated")
}
