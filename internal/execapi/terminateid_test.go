package execapi

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestTerminateMalformedIDRemovesNoFile: DELETE /v1/executions/{id} with
// an id no execution can have (here "../victim", sent as ..%2Fvictim,
// which the mux hands on unescaped) removes no file. terminate passed the
// path's id to Agents.Forget, whose key file removal joined it to KeyDir:
// any file named *.key the gateway could remove, outside KeyDir too, was
// removed (the gateway's TLS key, say).
func TestTerminateMalformedIDRemovesNoFile(t *testing.T) {
	f := newFixture(t)
	if err := os.MkdirAll(f.agents.cfg.KeyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(filepath.Dir(f.agents.cfg.KeyDir), "victim.key")
	if err := os.WriteFile(victim, []byte("not an execution's"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"..%2Fvictim", "x%2F..%2F..%2Fvictim"} {
		// As for any id no execution has: nothing to end.
		if status, body := f.do(t, http.MethodDelete, "/v1/executions/"+p, "admin", nil); status != http.StatusNoContent {
			t.Errorf("DELETE %s: %d %v, want 204", p, status, body)
		}
		if _, err := os.Stat(victim); err != nil {
			t.Fatalf("DELETE /v1/executions/%s: %v", p, err)
		}
	}
}
