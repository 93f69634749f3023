package execapi

import (
	"context"
	"net/http"
	"testing"

	"github.com/hostgate/hostgate/internal/store"
)

// TestExecutionIDRefusals: an executionId that cannot be one is refused
// with 400 saying what one is, by each route that takes one: a restore
// and a checkpoint listing said only "not a valid id", where a provision
// named the rule. One a machine's host already has is refused by a
// restore as by a provision (409), and neither reaches the engine.
func TestExecutionIDRefusals(t *testing.T) {
	f := newFixture(t)
	if _, err := f.st.Enroll(context.Background(), store.Enrollment{HostID: "laptop", Kind: "machine", HostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGyQ2m0s7yJ1l7Fqzvq2jk8o0nE1iYwq7m4fP3nYwq1d"}); err != nil {
		t.Fatal(err)
	}
	withID := func(id string) map[string]any {
		b := provisionBody()
		b["executionId"] = id
		return b
	}
	const rule = "executionId: " + store.HostIDRule
	for _, c := range []struct {
		method, path string
		body         any
		status       int
		code, msg    string
	}{
		{"POST", "/v1/executions", withID("../x"), http.StatusBadRequest, "invalid_request", rule},
		{"POST", "/v1/restores", map[string]any{"checkpointId": "c", "executionId": "../x"}, http.StatusBadRequest, "invalid_request", rule},
		{"GET", "/v1/checkpoints?executionId=../x", nil, http.StatusBadRequest, "invalid_request", rule},
		{"POST", "/v1/executions", withID("laptop"), http.StatusConflict, "conflict", ""},
		{"POST", "/v1/restores", map[string]any{"checkpointId": "c", "executionId": "laptop"}, http.StatusConflict, "conflict", ""},
	} {
		status, body := f.do(t, c.method, c.path, "admin", c.body)
		code, msg := errCode(body)
		if status != c.status || code != c.code || c.msg != "" && msg != c.msg {
			t.Errorf("%s %s: %d %s %q, want %d %s %q", c.method, c.path, status, code, msg, c.status, c.code, c.msg)
		}
	}
	f.ex.mu.Lock()
	defer f.ex.mu.Unlock()
	if n := len(f.ex.live); n != 0 {
		t.Errorf("%d executions made by refused requests", n)
	}
}
