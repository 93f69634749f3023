package main

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
)

// forbiddenCount is hostgate_auth_failures_total{reason="forbidden"} as
// base's /metrics says it.
func forbiddenCount(t *testing.T, base, admin string) float64 {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := regexp.MustCompile(`(?m)^hostgate_auth_failures_total\{reason="forbidden"\} (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("/metrics has no forbidden auth failures: %d %s", res.StatusCode, b)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestExecutionsForbiddenCounted: a client token's 403 on the executions
// API is a refused request of a valid token in the wrong role, counted in
// hostgate_auth_failures_total{reason="forbidden"} as the gateway's own
// routes count theirs.
func TestExecutionsForbiddenCounted(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	base := startServe(t, dir)
	out, err := cli(t, ctx, "token", "create", "--role", "admin", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	admin := lastLine(out)
	out, err = cli(t, ctx, "token", "create", "--role", "client", "--host", "h1", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	client := lastLine(out)
	before := forbiddenCount(t, base, admin)
	if status, body := apiCall(t, "POST", base+"/v1/executions", client, "{}"); status != http.StatusForbidden {
		t.Fatalf("POST /v1/executions as client: %d %v", status, body)
	}
	if after := forbiddenCount(t, base, admin); after != before+1 {
		t.Errorf("forbidden auth failures %v after a client's 403, want %v", after, before+1)
	}
}
