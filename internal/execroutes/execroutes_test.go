package execroutes

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRegisterOff: every route of the API answers an authorized caller
// 404 docker_off in JSON, an unauthorized one what authorize answered,
// and another method on its path a JSON 405 naming the allowed ones.
func TestRegisterOff(t *testing.T) {
	mux := http.NewServeMux()
	RegisterOff(mux, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Authorization") == "" {
			w.WriteHeader(http.StatusUnauthorized)
			return false
		}
		return true
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	do := func(method, path string, auth bool) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+strings.ReplaceAll(path, "{id}", "x"), strings.NewReader("{}"))
		if auth {
			req.Header.Set("Authorization", "Bearer t")
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.NewDecoder(res.Body).Decode(&body)
		return res.StatusCode, body.Error.Code, res.Header
	}
	for _, p := range Routes {
		m, path, _ := strings.Cut(p, " ")
		if status, code, _ := do(m, path, true); status != http.StatusNotFound || code != "docker_off" {
			t.Errorf("%s: %d %q, want 404 docker_off", p, status, code)
		}
		if status, _, _ := do(m, path, false); status != http.StatusUnauthorized {
			t.Errorf("%s unauthorized: %d, want authorize's 401", p, status)
		}
	}
	if status, code, h := do("PUT", "/v1/executions/{id}", true); status != http.StatusMethodNotAllowed || code != "method_not_allowed" || h.Get("Allow") != "GET, DELETE" {
		t.Errorf("PUT an execution: %d %q Allow %q, want 405 method_not_allowed, GET, DELETE", status, code, h.Get("Allow"))
	}
}

// TestRegisterOffWhy: the docker_off answer says why executions are off
// and what turns them on, as the gateway that registered the routes knows.
func TestRegisterOffWhy(t *testing.T) {
	mux := http.NewServeMux()
	RegisterOffWhy(mux, func(http.ResponseWriter, *http.Request) bool { return true }, "no Docker engine answered at its start")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/checkpoints", nil))
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.NewDecoder(rec.Body).Decode(&body)
	if rec.Code != http.StatusNotFound || body.Error.Code != "docker_off" || body.Error.Message != "Docker executions are off on this gateway: no Docker engine answered at its start" {
		t.Fatalf("%d %+v", rec.Code, body.Error)
	}
}
