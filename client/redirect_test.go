package client

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestRedirectNotFollowedAsGet: a gateway URL whose front redirects
// (http:// to https://, as most do, or to another path) with 301, 302 or
// 303 does not turn a call that changes something into a GET. net/http
// follows those with a GET of the new address, without the body:
// Terminate and DeleteCheckpoint got the GET's 200 and returned nil with
// the execution and the checkpoint still there, and Provision read the
// list of executions as an execution with an empty id. Such calls now
// fail, naming the redirect and the gateway URL to give instead; a GET
// still follows it.
func TestRedirectNotFollowedAsGet(t *testing.T) {
	var (
		mu     sync.Mutex
		served []string
	)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		served = append(served, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/executions":
			_, _ = io.WriteString(w, `{"executions":[{"executionId":"e1","image":"alpine"}],"truncated":false}`)
		case "/v1/executions/e1":
			_, _ = io.WriteString(w, `{"executionId":"e1","image":"alpine"}`)
		case "/v1/checkpoints/c1":
			_, _ = io.WriteString(w, `{"checkpointId":"c1","executionId":"e1"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no such endpoint"}}`)
		}
	}))
	defer gw.Close()
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther} {
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, gw.URL+r.URL.RequestURI(), status)
		}))
		ctx := t.Context()
		c, err := New(front.URL, "tok", nil)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		served = nil
		mu.Unlock()
		for name, call := range map[string]func() error{
			"Terminate":        func() error { return c.Terminate(ctx, "e1") },
			"DeleteCheckpoint": func() error { return c.DeleteCheckpoint(ctx, "c1") },
			"Provision": func() error {
				e, err := c.Provision(ctx, ProvisionRequest{Image: "alpine"})
				if err == nil && e.ExecutionID == "" {
					t.Errorf("%d: Provision returned an execution with no id, and no error", status)
				}
				return err
			},
		} {
			err := call()
			if err == nil || !strings.Contains(err.Error(), "a redirect to "+gw.URL) || !strings.Contains(err.Error(), "give New the gateway URL it leads to, "+gw.URL) {
				t.Errorf("%d: %s through a redirecting front: %v, want the redirect named and the URL to use", status, name, err)
			}
		}
		mu.Lock()
		if len(served) != 0 {
			t.Errorf("%d: the gateway got %q, want no request repeated as a GET", status, served)
		}
		mu.Unlock()
		if e, err := c.Execution(ctx, "e1"); err != nil || e.ExecutionID != "e1" {
			t.Errorf("%d: a GET through the redirect: %+v, %v; want it followed", status, e, err)
		}
		c.CloseIdleConnections()
		front.Close()
	}
}
