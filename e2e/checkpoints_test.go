package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/client"
)

// TestCheckpointLifecycle against the real gateway and engine: two
// checkpoints listed newest first, one deleted (gone for get, restore and
// the disk), a restore of the other, and --checkpoint-max-bytes removing
// the oldest once a third passes it.
func TestCheckpointLifecycle(t *testing.T) {
	// Each checkpoint holds 400 KB blobs of random bytes: one blob's two
	// checkpoints fit in 1 MiB, a one-blob and a two-blob one do not.
	g, c, image := execGateway(t, "--checkpoint-max-bytes", "1M")
	ctx := testCtx(t, 5*time.Minute)
	e := provision(t, ctx, c, execRequest(image))
	sh(t, ctx, c, e.ExecutionID, "head -c 400000 /dev/urandom > a && echo one > f")
	first, err := c.Checkpoint(ctx, e.ExecutionID, "first")
	if err != nil {
		t.Fatal(err)
	}
	sh(t, ctx, c, e.ExecutionID, "echo two > f && md5sum a > sums")
	second, err := c.Checkpoint(ctx, e.ExecutionID, "second")
	if err != nil {
		t.Fatal(err)
	}
	sums := sh(t, ctx, c, e.ExecutionID, "cat sums")

	l, err := c.ListCheckpoints(ctx, client.ListCheckpointsOptions{ExecutionID: e.ExecutionID})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, cp := range l.Checkpoints {
		got = append(got, cp.CheckpointID+" "+cp.Reason)
	}
	if want := []string{second.CheckpointID + " second", first.CheckpointID + " first"}; !slices.Equal(got, want) || l.Truncated {
		t.Fatalf("list: %q (truncated %v), want newest first %q", got, l.Truncated, want)
	}
	if cp := l.Checkpoints[0]; cp.SHA256 != second.SHA256 || cp.SizeBytes != second.SizeBytes || !cp.CreatedAt.Equal(second.CreatedAt) ||
		cp.ExecutionID != e.ExecutionID || cp.Image != image || cp.Resources != execRequest(image).Resources {
		t.Fatalf("listed %+v, checkpoint answered %+v", cp, second)
	}
	if cp, err := c.GetCheckpoint(ctx, first.CheckpointID); err != nil || cp.SHA256 != first.SHA256 || cp.Reason != "first" {
		t.Fatalf("get: %+v %v", cp, err)
	}

	// Delete the first: 204, then 404 everywhere, and its files gone.
	if err := c.DeleteCheckpoint(ctx, first.CheckpointID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if ae := apiErr(c.DeleteCheckpoint(ctx, first.CheckpointID)); ae == nil || ae.Status != http.StatusNotFound || ae.Code != "not_found" {
		t.Fatalf("second delete: %+v, want 404 not_found", ae)
	}
	if _, err := c.GetCheckpoint(ctx, first.CheckpointID); apiErr(err) == nil || apiErr(err).Status != http.StatusNotFound {
		t.Fatalf("get of the deleted: %v, want 404", err)
	}
	if _, err := c.Restore(ctx, client.RestoreRequest{CheckpointID: first.CheckpointID}); apiErr(err) == nil || apiErr(err).Status != http.StatusNotFound {
		t.Fatalf("restore of the deleted: %v, want 404", err)
	}
	if left, _ := filepath.Glob(filepath.Join(g.stateDir, "checkpoints", first.CheckpointID+"*")); len(left) != 0 {
		t.Fatalf("the deleted checkpoint left %q", left)
	}
	if status, body := g.api("DELETE", "/v1/checkpoints/..%2fgateway.db", g.admin, nil); status != http.StatusNotFound || !strings.Contains(string(body), "not_found") {
		t.Fatalf("delete of a malformed id: %d %s", status, body)
	}
	if _, err := os.Stat(filepath.Join(g.stateDir, "gateway.db")); err != nil {
		t.Fatalf("the state database after a malformed delete: %v", err)
	}
	if status, body := g.api("GET", "/v1/checkpoints", g.token("client", e.ExecutionID), nil); status != http.StatusForbidden {
		t.Fatalf("list with a client token: %d %s", status, body)
	}

	// Restore the second.
	r, err := c.Restore(ctx, client.RestoreRequest{CheckpointID: second.CheckpointID})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	t.Cleanup(func() { _ = c.Terminate(context.Background(), r.ExecutionID) })
	if out := sh(t, ctx, c, r.ExecutionID, "cat f; md5sum a"); out != "two\n"+sums {
		t.Fatalf("restored workspace: %q, want two and %q", out, sums)
	}

	// Retention by bytes: with a second blob, this checkpoint and the
	// second pass 1 MiB; the oldest (the second) goes, logged.
	sh(t, ctx, c, r.ExecutionID, "head -c 400000 /dev/urandom > b")
	third, err := c.Checkpoint(ctx, r.ExecutionID, "third")
	if err != nil {
		t.Fatal(err)
	}
	if second.SizeBytes+third.SizeBytes <= 1<<20 {
		t.Fatalf("sizes %d and %d: the test's premise does not hold", second.SizeBytes, third.SizeBytes)
	}
	// The retention runs in the background once the checkpoint has
	// answered: wait for its log line, then list.
	re := regexp.MustCompile(`msg="checkpoint removed by retention" (\S+ )?checkpoint=` + second.CheckpointID + ` rule=max-bytes age=\S+ bytesFreed=` + strconv.FormatInt(second.SizeBytes, 10))
	waitFor(t, "the retention's removal of "+second.CheckpointID+" in the gateway's log", func() (string, bool) {
		return "", re.MatchString(g.proc.output())
	})
	l, err = c.ListCheckpoints(ctx, client.ListCheckpointsOptions{})
	if err != nil || len(l.Checkpoints) != 1 || l.Checkpoints[0].CheckpointID != third.CheckpointID {
		t.Fatalf("after the third checkpoint over --checkpoint-max-bytes: %+v %v, want only the third", l, err)
	}
	if _, err := c.Restore(ctx, client.RestoreRequest{CheckpointID: second.CheckpointID}); apiErr(err) == nil || apiErr(err).Status != http.StatusNotFound {
		t.Fatalf("restore of the checkpoint retention removed: %v, want 404", err)
	}
}
