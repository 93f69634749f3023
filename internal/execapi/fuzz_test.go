package execapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/dockerhost"
)

// FuzzBodies sends peer-controlled bodies to every route: the answer is
// never a 5xx and always the JSON error shape (or a success).
func FuzzBodies(f *testing.F) {
	f.Add(0, `{"image":"x","resources":{"cpus":1}}`)
	f.Add(1, `{"command":"echo","args":["a"],"timeoutMs":5}`)
	f.Add(2, `{"reason":"r"}`)
	f.Add(3, `{"checkpointId":"cp-1","executionId":"e"}`)
	f.Add(0, `{"resources":{"cpus":"1"}}`)
	f.Add(0, `{"env":{"A":1}}`)
	f.Add(1, `[]`)
	f.Add(1, `{"command":"echo","stdin":"aGk=","encoding":"base64","timeoutMs":5}`)
	f.Add(1, `{"command":"echo","stdin":"%%%","encoding":"base64","timeoutMs":5}`)
	f.Add(4, `{"runtimeMs":60000}`)
	f.Add(4, `{"runtimeMs":-1}`)
	f.Add(4, `{"runtimeMs":1e400}`)
	ex := newFakeExecutions()
	ex.add("e1", "img", "")
	api, err := New(ex, &Config{Authorize: func(http.ResponseWriter, *http.Request) bool { return true }})
	if err != nil {
		f.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	paths := []string{"/v1/executions", "/v1/executions/e1/exec", "/v1/executions/e1/checkpoints", "/v1/restores", "/v1/executions/e1/timeout"}
	f.Fuzz(func(t *testing.T, route int, body string) {
		if route < 0 {
			route = -route
		}
		req := httptest.NewRequest("POST", paths[route%len(paths)], strings.NewReader(body))
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		// The fake's "engine-down" command stands for the engine failing.
		if rec.Code >= 500 && !strings.Contains(body, "engine-down") {
			t.Fatalf("%s %q: %d %s", req.URL.Path, body, rec.Code, rec.Body)
		}
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %q: not JSON: %q", req.URL.Path, body, rec.Body)
		}
		if rec.Code >= 400 {
			if e, ok := out["error"].(map[string]any); !ok || e["code"] == "" || e["message"] == "" {
				t.Fatalf("%s %q: error shape %v", req.URL.Path, body, out)
			}
		}
	})
}

// FuzzCheckpointIDPath: whatever the path's checkpoint id, get and delete
// answer JSON and never 5xx, and only a well-formed id reaches the store.
func FuzzCheckpointIDPath(f *testing.F) {
	for _, s := range []string{"cafe0000000000000000000000000001", "..%2f..%2fgateway.db", "%00", "CAFE0000000000000000000000000001", "x", "cafe0000000000000000000000000001%2f"} {
		f.Add(s)
	}
	ex := newFakeExecutions()
	api, err := New(ex, &Config{Authorize: func(http.ResponseWriter, *http.Request) bool { return true }})
	if err != nil {
		f.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	f.Fuzz(func(t *testing.T, id string) {
		for _, m := range []string{"GET", "DELETE"} {
			req, err := http.NewRequest(m, "http://gw/v1/checkpoints/"+id, nil)
			if err != nil {
				return // not a URL a client could send
			}
			// The router matches the escaped path: the seed
			// "..%2f..%2fgateway.db" is one segment, and the handler's
			// id "../../gateway.db". Filtered on the unescaped path, as
			// this was, every id holding an escaped '/' was skipped.
			esc := req.URL.EscapedPath()
			if _, pattern := mux.Handler(req); pattern != m+" /v1/checkpoints/{id}" || path.Clean(esc) != esc {
				return // another route's path, or none, or one the router cleans
			}
			ex.mu.Lock()
			before := ex.checkpointCalls
			ex.mu.Unlock()
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			ex.mu.Lock()
			reached := ex.checkpointCalls != before
			ex.mu.Unlock()
			if rec.Code >= 500 || !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%s %q: %d %q", m, id, rec.Code, rec.Body)
			}
			if reached && !dockerhost.ValidCheckpointID(req.PathValue("id")) {
				t.Fatalf("%s %q: a malformed id reached the store", m, id)
			}
		}
	})
}
