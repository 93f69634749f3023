package execapi

import (
	"context"
	"net/http"
	"testing"

	"github.com/hostgate/hostgate/internal/store"
)

// TestTerminateMachineIDForgetsNothing: DELETE /v1/executions/{id} is
// idempotent, so an id no execution has answers 204; when it names a
// machine's host, that host is not forgotten. Forgot was told of it
// (its host record "deleted": DeleteHost of an execution's kind deletes
// none and says nil), and the gateway dropped the machine's public
// preview shares with it.
func TestTerminateMachineIDForgetsNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.st.Enroll(ctx, store.Enrollment{HostID: "laptop", Kind: "machine", HostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGyQ2m0s7yJ1l7Fqzvq2jk8o0nE1iYwq7m4fP3nYwq1d"}); err != nil {
		t.Fatal(err)
	}
	if status, body := f.do(t, "DELETE", "/v1/executions/laptop", "admin", nil); status != http.StatusNoContent {
		t.Fatalf("terminate of a machine's id: %d %v, want 204", status, body)
	}
	// An execution's terminate after it: Forgot hears of that one alone.
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id, _ := body["executionId"].(string)
	if status, body := f.do(t, "DELETE", "/v1/executions/"+id, "admin", nil); status != http.StatusNoContent {
		t.Fatalf("terminate: %d %v", status, body)
	}
	if got := <-f.forgot; got != id {
		t.Errorf("Forgot was told of %q, want only the execution %q", got, id)
	}
	if h, err := f.st.Host(ctx, "laptop"); err != nil || h.Kind != "machine" {
		t.Fatalf("the machine's host: %+v %v", h, err)
	}
}
