package execapi

import (
	"net/http"
	"strings"
	"testing"
)

// TestNullElementRefused: a null among an exec's args or as an env value
// (JSON.stringify's for an undefined array element) is refused naming the
// field, where encoding/json made it "" and ran the command with an empty
// argument or variable the caller never sent.
func TestNullElementRefused(t *testing.T) {
	f := newFixture(t)
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id, _ := body["executionId"].(string)
	prov := func(env string) string {
		return `{"image":"busybox@sha256:` + strings.Repeat("a", 64) + `","workspace":{"kind":"empty"},` +
			`"resources":{"cpus":1,"memoryBytes":67108864,"diskBytes":16777216,"pids":64,"runtimeMs":60000,"maxOutputBytes":1048576},` +
			`"network":{"mode":"none"},"env":` + env + `}`
	}
	for _, c := range []struct{ name, path, body, field string }{
		{"exec args", "/v1/executions/" + id + "/exec", `{"command":"/bin/sh","args":["-c",null],"timeoutMs":1000}`, "args"},
		{"exec env", "/v1/executions/" + id + "/exec", `{"command":"x","env":{"A":null},"timeoutMs":1000}`, "env.A"},
		{"provision env", "/v1/executions", prov(`{"A":"1","B":null}`), "env.B"},
		{"restore env", "/v1/restores", `{"checkpointId":"` + strings.Repeat("a", 32) + `","env":{"C":null}}`, "env.C"},
	} {
		status, body := f.do(t, "POST", c.path, "admin", c.body)
		code, msg := errCode(body)
		if status != http.StatusBadRequest || code != "invalid_request" || !strings.HasPrefix(msg, c.field+": ") {
			t.Errorf("%s: %d %q %q, want 400 invalid_request naming %s", c.name, status, code, msg, c.field)
		}
	}
	// A null field is still as good as one left out.
	if status, body := f.do(t, "POST", "/v1/executions/"+id+"/exec", "admin", `{"command":"x","args":null,"env":null,"timeoutMs":1000}`); status != http.StatusOK {
		t.Errorf("null args and env fields: %d %v, want 200", status, body)
	}
}
