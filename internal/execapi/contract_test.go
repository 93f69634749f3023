package execapi

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestWireContract holds the executions API to DESIGN.md's wire contract,
// field by field, as the JSON on the wire spells it (tests outside the
// project read it so; the client package decodes with the same tags, so
// a renamed field would pass every test that goes through it):
// provision 201 {executionId, hostKey "SHA256:…", hostPublicKey
// "ssh-ed25519 AAAA…", expiresAt}; exec 200 {exitCode, stdout, stderr,
// durationMs}; checkpoint 201 {checkpointId, createdAt, sizeBytes,
// sha256}; restore 201 like provision; a timeout or an output overflow
// answers its code, and the execution is 410 afterwards; DELETE is
// idempotent.
func TestWireContract(t *testing.T) {
	f := newFixture(t)
	provisioned := func(what string, status int, body map[string]any) string {
		t.Helper()
		id, _ := body["executionId"].(string)
		hostKey, _ := body["hostKey"].(string)
		hostPub, _ := body["hostPublicKey"].(string)
		exp, _ := body["expiresAt"].(string)
		if _, err := time.Parse(time.RFC3339Nano, exp); status != http.StatusCreated || id == "" ||
			!strings.HasPrefix(hostKey, "SHA256:") || !strings.HasPrefix(hostPub, "ssh-ed25519 AAAA") || err != nil {
			t.Fatalf("%s: %d %v, want 201 {executionId, hostKey: \"SHA256:…\", hostPublicKey: \"ssh-ed25519 AAAA…\", expiresAt}", what, status, body)
		}
		return id
	}
	status, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := provisioned("provision", status, body)
	if status, got := f.do(t, "GET", "/v1/executions/"+id, "admin", nil); status != http.StatusOK || got["executionId"] != id || got["hostKey"] != body["hostKey"] {
		t.Fatalf("GET /v1/executions/%s: %d %v", id, status, got)
	}

	status, body = f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", map[string]any{"command": "tee", "stdin": "x", "timeoutMs": 1000})
	if status != http.StatusOK || body["exitCode"] != float64(0) || body["stdout"] != "x" || body["stderr"] != "err:x" || body["durationMs"] != float64(1) {
		t.Fatalf("exec: %d %v, want 200 {exitCode: 0, stdout: \"x\", stderr: \"err:x\", durationMs: 1}", status, body)
	}

	status, body = f.do(t, "POST", "/v1/executions/"+id+"/checkpoints", "admin", map[string]any{"reason": "handoff"})
	cp, _ := body["checkpointId"].(string)
	created, _ := body["createdAt"].(string)
	sum, _ := body["sha256"].(string)
	size, isNumber := body["sizeBytes"].(float64)
	if _, err := time.Parse(time.RFC3339Nano, created); status != http.StatusCreated || cp == "" || err != nil || len(sum) != 64 || !isNumber || size < 0 {
		t.Fatalf("checkpoint: %d %v, want 201 {checkpointId, createdAt, sizeBytes, sha256}", status, body)
	}
	status, body = f.do(t, "POST", "/v1/restores", "admin", map[string]any{"checkpointId": cp})
	restored := provisioned("restore", status, body)

	for _, c := range []struct {
		command string
		status  int
		code    string
	}{
		{"flood", http.StatusUnprocessableEntity, "output_limit"},
		{"spin", http.StatusGatewayTimeout, "timeout"},
	} {
		status, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
		id := provisioned("provision", status, body)
		status, body = f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", map[string]any{"command": c.command, "timeoutMs": 1000})
		if code, _ := errCode(body); status != c.status || code != c.code {
			t.Errorf("%s: %d %v, want %d %s", c.command, status, body, c.status, c.code)
		}
		if status, body := f.do(t, "GET", "/v1/executions/"+id, "admin", nil); status != http.StatusGone {
			t.Errorf("GET after %s: %d %v, want 410", c.code, status, body)
		}
	}

	for _, del := range []string{id, id, restored, "never-provisioned"} {
		if status, body := f.do(t, "DELETE", "/v1/executions/"+del, "admin", nil); status != http.StatusNoContent {
			t.Errorf("DELETE /v1/executions/%s: %d %v, want 204 (idempotent)", del, status, body)
		}
	}
	if status, body := f.do(t, "GET", "/v1/executions/"+id, "admin", nil); status != http.StatusGone {
		t.Errorf("GET after DELETE: %d %v, want 410", status, body)
	}
}
