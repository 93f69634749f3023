package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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
	mux.HandleFunc("GET /v1/executions", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "limit=2" {
			reply(400, map[string]any{"error": map[string]string{"code": "invalid_request", "message": "query " + r.URL.RawQuery}})(w, r)
			return
		}
		reply(200, map[string]any{"executions": []any{map[string]any{"executionId": "e2", "hostKey": "SHA256:y", "connected": true}, map[string]any{"executionId": "e1"}}, "truncated": true})(w, r)
	})
	mux.HandleFunc("POST /v1/executions/{id}/timeout", func(w http.ResponseWriter, r *http.Request) {
		var req struct{ RuntimeMs int64 }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.RuntimeMs != 90000 {
			reply(400, map[string]any{"error": map[string]string{"code": "invalid_request", "message": "runtimeMs: want 90000"}})(w, r)
			return
		}
		reply(200, map[string]any{"executionId": r.PathValue("id"), "expiresAt": "2026-12-04T00:00:00Z"})(w, r)
	})
	mux.HandleFunc("GET /v1/executions/{id}", reply(410, map[string]any{"error": map[string]string{"code": "gone", "message": "ended"}}))
	mux.HandleFunc("POST /v1/executions/{id}/exec", reply(200, map[string]any{"exitCode": 3, "stdout": "o", "stderr": "e", "durationMs": 5}))
	mux.HandleFunc("POST /v1/executions/{id}/checkpoints", reply(201, map[string]any{"checkpointId": "cp", "sizeBytes": 10, "sha256": "ab"}))
	mux.HandleFunc("POST /v1/restores", reply(201, map[string]any{"executionId": "e2", "restoredFrom": "cp"}))
	mux.HandleFunc("DELETE /v1/executions/{id}", reply(204, nil))
	mux.HandleFunc("GET /v1/checkpoints", func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query(); q.Get("executionId") != "e1" || q.Get("limit") != "5" {
			reply(400, map[string]any{"error": map[string]string{"code": "invalid_request", "message": "query " + r.URL.RawQuery}})(w, r)
			return
		}
		reply(200, map[string]any{"checkpoints": []any{map[string]any{"checkpointId": "cp", "executionId": "e1", "reason": "why", "image": "i", "sizeBytes": 10}}, "truncated": true})(w, r)
	})
	mux.HandleFunc("GET /v1/checkpoints/{id}", reply(200, map[string]any{"checkpointId": "cp", "reason": "why", "resources": map[string]any{"pids": 7}}))
	mux.HandleFunc("DELETE /v1/checkpoints/{id}", reply(404, map[string]any{"error": map[string]string{"code": "not_found", "message": "no checkpoint"}}))
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
	st, err := c.SetTimeout(ctx, "e1", 90*time.Second)
	if err != nil || st.ExecutionID != "e1" || !st.ExpiresAt.Equal(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("set timeout: %+v %v", st, err)
	}
	if _, err := c.SetTimeout(ctx, "e1", time.Microsecond); err == nil || !strings.Contains(err.Error(), "at least 1ms") {
		t.Fatalf("set timeout under 1ms: %v", err)
	}
	el, err := c.Executions(ctx, ListExecutionsOptions{Limit: 2})
	if err != nil || len(el.Executions) != 2 || !el.Truncated || el.Executions[0].ExecutionID != "e2" || el.Executions[0].HostKey != "SHA256:y" || !el.Executions[0].Connected {
		t.Fatalf("executions: %+v %v", el, err)
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
	l, err := c.ListCheckpoints(ctx, ListCheckpointsOptions{ExecutionID: "e1", Limit: 5})
	if err != nil || len(l.Checkpoints) != 1 || !l.Truncated || l.Checkpoints[0].CheckpointID != "cp" || l.Checkpoints[0].Reason != "why" || l.Checkpoints[0].Image != "i" || l.Checkpoints[0].SizeBytes != 10 {
		t.Fatalf("list checkpoints: %+v %v", l, err)
	}
	got, err := c.GetCheckpoint(ctx, "cp")
	if err != nil || got.CheckpointID != "cp" || got.Reason != "why" || got.Resources.Pids != 7 {
		t.Fatalf("get checkpoint: %+v %v", got, err)
	}
	if err := c.DeleteCheckpoint(ctx, "cp"); !errors.As(err, &ae) || ae.Status != 404 || ae.Code != "not_found" {
		t.Fatalf("delete checkpoint: %v", err)
	}
	want := []string{"POST /v1/executions Bearer tok", "POST /v1/executions Bearer tok", "GET /v1/executions/e1 Bearer tok",
		"POST /v1/executions/e1/timeout Bearer tok", "GET /v1/executions Bearer tok", "POST /v1/executions/e1/exec Bearer tok", "POST /v1/executions/e1/checkpoints Bearer tok", "POST /v1/restores Bearer tok",
		"DELETE /v1/executions/e1 Bearer tok", "GET /v1/checkpoints Bearer tok", "GET /v1/checkpoints/cp Bearer tok", "DELETE /v1/checkpoints/cp Bearer tok"}
	if len(seen) != len(want) {
		t.Fatalf("requests %q, want %q", seen, want)
	}
	for i, w := range want {
		if seen[i] != w {
			t.Fatalf("requests %q, want %q", seen, want)
		}
	}
}

// TestExecBase64: with EncodingBase64 the client sends stdin as base64 and
// hands back the raw bytes of the output; the request without it is as it
// always was.
func TestExecBase64(t *testing.T) {
	in := make([]byte, 0, 260)
	for i := range 256 {
		in = append(in, byte(i))
	}
	in = append(in, 0xed, 0xa0, 0x80, 0xc0) // a surrogate, a cut sequence
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		bodies = append(bodies, body)
		stdin, _ := body["stdin"].(string)
		enc, _ := body["encoding"].(string)
		if enc == "base64" {
			raw, err := base64.StdEncoding.DecodeString(stdin)
			if err != nil {
				w.WriteHeader(400)
				return
			}
			stdin = base64.StdEncoding.EncodeToString(raw) // echoed as it came
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"exitCode": 0, "stdout": stdin, "stderr": stdin, "durationMs": 1, "encoding": enc})
	}))
	defer srv.Close()
	c, err := New(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.Exec(ctx, "e1", ExecRequest{Command: "cat", Stdin: string(in), TimeoutMs: 1000, Encoding: EncodingBase64})
	if err != nil || r.Stdout != string(in) || r.Stderr != string(in) || r.Encoding != EncodingBase64 {
		t.Fatalf("base64 exec: %v %+v", err, r)
	}
	if got := bodies[0]["stdin"]; got != base64.StdEncoding.EncodeToString(in) {
		t.Fatalf("stdin on the wire %q, want base64", got)
	}
	if _, err := c.Exec(ctx, "e1", ExecRequest{Command: "cat", Stdin: "text", TimeoutMs: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, ok := bodies[1]["encoding"]; ok || bodies[1]["stdin"] != "text" {
		t.Fatalf("default request on the wire: %v, want it as it always was", bodies[1])
	}
}

// TestExecLongAnswer checks that an exec's answer is read up to what a
// gateway may send (64 MiB of output, six bytes a byte as JSON text), not
// to the 16 MiB of the other calls, and that a longer one fails naming the
// bound rather than as JSON cut short.
//
// What it checks is the length read, not how fast: the calls take the
// test's context, with no deadline of its own (go test's -timeout still
// ends a hang, with every goroutine's stack). With standIn's 30 s one it
// failed once under -race at load 12-15 on 2 cores, the answer still
// being decoded; it takes 6 s under -race at load 2.6.
func TestExecLongAnswer(t *testing.T) {
	out := string(make([]byte, 4<<20)) // NULs: "\u0000" each, 24 MiB of JSON
	// Encoded once, not per request: the stand-in's work is not what is
	// under test, and the second call reads only the first MiB of it.
	answer, err := json.Marshal(map[string]any{"exitCode": 0, "stdout": out, "stderr": "", "durationMs": 1})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := standIn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(answer)
	}))
	ctx := t.Context()
	r, err := c.Exec(ctx, "e1", ExecRequest{Command: "cat", TimeoutMs: 1000})
	if err != nil || len(r.Stdout) != len(out) {
		t.Fatalf("exec of 4 MiB of NULs: %v", err)
	}
	var res ExecResult
	err = c.doLimit(ctx, c.http, 1<<20, "POST", "/v1/executions/e1/exec", nil, &res)
	if err == nil || !strings.Contains(err.Error(), "longer than the 1048576 bytes") {
		t.Fatalf("an answer past the bound: %v, want it named", err)
	}
}

// TestEmptyIDRefused: a call with an empty id fails before any request,
// saying so; the gateway would answer a path without it ("no such
// endpoint", or for an exec "POST is not allowed here" after a redirect).
func TestEmptyIDRefused(t *testing.T) {
	var requests atomic.Int64
	c, ctx := standIn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusNotFound)
	}))
	calls := map[string]func() error{
		"Dial":             func() error { _, err := c.Dial(ctx, ""); return err },
		"LazyHost":         func() error { _, err := c.LazyHost("").FS(ctx); return err },
		"Host":             func() error { _, err := c.Host(ctx, ""); return err },
		"Certificate":      func() error { _, err := c.Certificate(ctx, "", "ssh-ed25519 AAAA"); return err },
		"DialSSH":          func() error { _, err := c.DialSSH(ctx, ""); return err },
		"Execution":        func() error { _, err := c.Execution(ctx, ""); return err },
		"SetTimeout":       func() error { _, err := c.SetTimeout(ctx, "", time.Second); return err },
		"Exec":             func() error { _, err := c.Exec(ctx, "", ExecRequest{Command: "true", TimeoutMs: 1}); return err },
		"Checkpoint":       func() error { _, err := c.Checkpoint(ctx, "", "r"); return err },
		"Terminate":        func() error { return c.Terminate(ctx, "") },
		"GetCheckpoint":    func() error { _, err := c.GetCheckpoint(ctx, ""); return err },
		"DeleteCheckpoint": func() error { return c.DeleteCheckpoint(ctx, "") },
	}
	for name, call := range calls {
		if err := call(); err == nil || !strings.Contains(err.Error(), "id is empty") {
			t.Errorf("%s with an empty id: %v, want it refused as empty", name, err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests sent for empty ids, want none", n)
	}
}

// standIn is a client of a stand-in gateway answering with h, and a ctx
// for its calls; both end with the test.
func standIn(t *testing.T, h http.Handler) (*Client, context.Context) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c, ctx
}

// TestEndedReason: a gone answer's reason and endedAt reach the caller as
// APIError's Reason and EndedAt, through errors.As (audit31: the gateway
// logged why an execution ended, the caller never saw it).
func TestEndedReason(t *testing.T) {
	c, ctx := standIn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusGone)
		_, _ = io.WriteString(w, `{"error":{"code":"gone","message":"execution \"x\" ended 12s ago (reason terminated, at 2026-12-03T19:04:44Z): it was terminated by a DELETE of it (or a Terminate)","reason":"terminated","endedAt":"2026-12-03T19:04:44.5Z"}}`)
	}))
	_, err := c.Execution(ctx, "x")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusGone || ae.Code != "gone" {
		t.Fatalf("%v, want a 410 gone *APIError", err)
	}
	if want := time.Date(2026, 12, 3, 19, 4, 44, 5e8, time.UTC); ae.Reason != "terminated" || !ae.EndedAt.Equal(want) {
		t.Fatalf("reason %q, endedAt %v, want terminated at %v", ae.Reason, ae.EndedAt, want)
	}
	if !strings.Contains(err.Error(), "ended 12s ago (reason terminated, at 2026-12-03T19:04:44Z): it was terminated by a DELETE of it (or a Terminate) (410 gone)") {
		t.Fatalf("%v, want the gateway's message", err)
	}
}

// TestExecCutByCtxSaysTheExecutionGoes: an Exec whose ctx ends before the
// answer returns ctx's error saying what it costs, as the gateway
// destroys the execution of an exec whose caller went away: an agent's
// program read `Post "http://…/exec": context deadline exceeded`, and
// learnt that its sandbox was gone only from the next call's 410.
func TestExecCutByCtxSaysTheExecutionGoes(t *testing.T) {
	arrived := make(chan struct{})
	c, _ := standIn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // then the server sees its caller go
		close(arrived)
		<-r.Context().Done() // the command runs on until its caller goes
	}))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-arrived; cancel() }()
	_, err := c.Exec(ctx, "e1", ExecRequest{Command: "sleep", Args: []string{"60"}, TimeoutMs: 60000})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("exec cut by its ctx: %v, want ctx's error", err)
	}
	for _, want := range []string{`execution "e1"`, "destroys", "TimeoutMs", "Host.Exec"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("exec cut by its ctx: %q does not say %q", err, want)
		}
	}
	if strings.HasPrefix(err.Error(), "Post ") {
		t.Errorf("exec cut by its ctx: %q is net/http's error", err)
	}
}

// TestExecCutOutput: an exec's timeout and output_limit answers carry what
// the command printed before it was cut; the *APIError holds it, raw
// (base64 decoded), with the lossy flags, and its Error text does not.
// Other errors hold none.
func TestExecCutOutput(t *testing.T) {
	answers := map[string]string{
		"hung":  `{"error":{"code":"timeout","message":"command ran longer than 100 ms; the execution was destroyed","stdout":"before\n","stderr":"warn \ufffd\n","stderrLossy":true}}`,
		"flood": `{"error":{"code":"output_limit","message":"stdout and stderr exceeded 4 bytes; the execution was destroyed","stdout":"/3kK","stderr":"eQ==","encoding":"base64"}}`,
		"bad":   `{"error":{"code":"timeout","message":"timed out","stdout":"not base64!","stderr":"","encoding":"base64"}}`,
		"other": `{"error":{"code":"gone","message":"execution \"other\" ended","reason":"timeout"}}`,
	}
	status := map[string]int{"hung": http.StatusGatewayTimeout, "flood": http.StatusUnprocessableEntity, "bad": http.StatusGatewayTimeout, "other": http.StatusGone}
	c, ctx := standIn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.Split(r.URL.Path, "/")[3] // /v1/executions/{id}/exec
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status[id])
		_, _ = io.WriteString(w, answers[id])
	}))
	for _, tc := range []struct {
		id, stdout, stderr string
		lossy, b64         bool
		msg                string
	}{
		{"hung", "before\n", "warn \ufffd\n", true, false, "command ran longer than 100 ms; the execution was destroyed (504 timeout)"},
		{"flood", "\xffy\n", "y", false, true, "stdout and stderr exceeded 4 bytes; the execution was destroyed (422 output_limit)"},
		{"bad", "", "", false, true, "timed out (its output came as invalid base64 and was dropped) (504 timeout)"},
		{"other", "", "", false, false, "execution \"other\" ended (410 gone)"},
	} {
		req := ExecRequest{Command: "x", TimeoutMs: 100}
		if tc.b64 {
			req.Encoding = EncodingBase64
		}
		_, err := c.Exec(ctx, tc.id, req)
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != status[tc.id] || ae.Stdout != tc.stdout || ae.Stderr != tc.stderr || ae.StderrLossy != tc.lossy || ae.StdoutLossy {
			t.Errorf("%s: %#v, want stdout %q, stderr %q, stderrLossy %v", tc.id, err, tc.stdout, tc.stderr, tc.lossy)
			continue
		}
		if got := err.Error(); got != "gateway: "+tc.msg {
			t.Errorf("%s: %q, want %q (the output stays out of the text)", tc.id, got, "gateway: "+tc.msg)
		}
	}
}
