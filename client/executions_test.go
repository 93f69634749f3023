package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestExecutionsClient checks each method's route and body against a
// stand-in gateway, and that error answers become *APIError.
func TestExecutionsClient(t *testing.T) {
	var seen []string
	mux := http.NewServeMux()
	reply := func(status int, v any) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			if v != nil {
				_ = json.NewEncoder(w).Encode(v)
			}
		}
	}
	mux.HandleFunc("POST /v1/executions", func(w http.ResponseWriter, r *http.Request) {
		var req ProvisionRequest
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.Resources.Pids != 7 || req.Network.Mode != "none" {
			reply(400, map[string]any{"error": map[string]string{"code": "invalid_request", "message": "resources.pids: is required"}})(w, r)
			return
		}
		reply(201, map[string]any{"executionId": "e1", "hostKey": "SHA256:x", "hostPublicKey": "ssh-ed25519 AAAA", "connected": true})(w, r)
	})
	mux.HandleFunc("GET /v1/executions/{id}", reply(410, map[string]any{"error": map[string]string{"code": "gone", "message": "ended"}}))
	mux.HandleFunc("POST /v1/executions/{id}/exec", reply(200, map[string]any{"exitCode": 3, "stdout": "o", "stderr": "e", "durationMs": 5}))
	mux.HandleFunc("POST /v1/executions/{id}/checkpoints", reply(201, map[string]any{"checkpointId": "cp", "sizeBytes": 10, "sha256": "ab"}))
	mux.HandleFunc("POST /v1/restores", reply(201, map[string]any{"executionId": "e2", "restoredFrom": "cp"}))
	mux.HandleFunc("DELETE /v1/executions/{id}", reply(204, nil))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := New(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	_, err = c.Provision(ctx, ProvisionRequest{Image: "i"})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Message != "resources.pids: is required" {
		t.Fatalf("refused provision: %v", err)
	}
	e, err := c.Provision(ctx, ProvisionRequest{Image: "i", Resources: Resources{Pids: 7}, Network: Network{Mode: "none"}})
	if err != nil || e.ExecutionID != "e1" || e.HostKey != "SHA256:x" || !e.Connected {
		t.Fatalf("provision: %+v %v", e, err)
	}
	if _, err := c.Execution(ctx, "e1"); !errors.As(err, &ae) || ae.Status != 410 || ae.Code != "gone" {
		t.Fatalf("execution: %v", err)
	}
	r, err := c.Exec(ctx, "e1", ExecRequest{Command: "x", TimeoutMs: 1})
	if err != nil || r.ExitCode != 3 || r.Stdout != "o" || r.Stderr != "e" || r.DurationMs != 5 {
		t.Fatalf("exec: %+v %v", r, err)
	}
	cp, err := c.Checkpoint(ctx, "e1", "why")
	if err != nil || cp.CheckpointID != "cp" || cp.SizeBytes != 10 {
		t.Fatalf("checkpoint: %+v %v", cp, err)
	}
	e2, err := c.Restore(ctx, RestoreRequest{CheckpointID: "cp"})
	if err != nil || e2.ExecutionID != "e2" || e2.RestoredFrom != "cp" {
		t.Fatalf("restore: %+v %v", e2, err)
	}
	if err := c.Terminate(ctx, "e1"); err != nil {
		t.Fatalf("terminate: %v", err)
	}
	want := []string{"POST /v1/executions Bearer tok", "POST /v1/executions Bearer tok", "GET /v1/executions/e1 Bearer tok",
		"POST /v1/executions/e1/exec Bearer tok", "POST /v1/executions/e1/checkpoints Bearer tok", "POST /v1/restores Bearer tok",
		"DELETE /v1/executions/e1 Bearer tok"}
	if len(seen) != len(want) {
		t.Fatalf("requests %q, want %q", seen, want)
	}
	for i, w := range want {
		if seen[i] != w {
			t.Fatalf("requests %q, want %q", seen, want)
		}
	}
}
