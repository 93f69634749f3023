package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/store"
)

// TestHostRemove: `gateway host remove` forgets a retired machine host and
// revokes its agent tokens. Nothing removed a machine host (found by the
// audit42b README audit): a retired machine stayed in the host list for
// good, and one enrolled as BUILD-01 next to build-01 kept build-01's
// subdomain previews answering 409 ambiguous_host, its token revoked or
// not. Here, with a gateway serving: the preview is ambiguous, `host
// remove BUILD-01` revokes its token (which then enrolls nothing), its
// connected agent is cut, and the host leaves the list and the 409 ends.
func TestHostRemove(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir, func(c *serveConfig) { c.PreviewDomain = "preview.test"; c.TokenRecheck = 200 * time.Millisecond })
	mk := tokenMaker(t, ctx, dir)
	lower := mk("--role", "agent", "--host", "build-01")
	upper := mk("--role", "agent", "--host", "BUILD-01", "--name", "twin-agent")
	mk("--role", "client", "--host", "BUILD-01", "--name", "laptop")
	admin := mk("--role", "admin")
	echoAgent(t, ctx, base, lower)
	echoAgent(t, ctx, base, upper) // left connected: the remove cuts it

	get := func(host, path, token string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Accept", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	const sub = "3417--build-01.preview.test"
	if code, body := get(sub, "/", ""); code != http.StatusConflict || !strings.Contains(body, "ambiguous_host") {
		t.Fatalf("the subdomain with a case twin enrolled: %d %.300s, want 409 ambiguous_host", code, body)
	}

	// Refusals first: no such host (naming the case twins), and the usage.
	if _, err := cli(t, ctx, "host", "remove", "Build-01", "--state-dir", dir); err == nil ||
		!strings.Contains(err.Error(), `no host "Build-01"`) || !strings.Contains(err.Error(), "BUILD-01, build-01") {
		t.Errorf("remove of an id that differs only in case: %v, want no host, naming BUILD-01 and build-01", err)
	}
	if _, err := cli(t, ctx, "host", "remove", "--state-dir", dir); err == nil || !strings.Contains(err.Error(), "want exactly one host id") {
		t.Errorf("remove without an id: %v", err)
	}

	// A public share of the twin, which the remove takes from the state.
	share := func(port string) {
		t.Helper()
		if code, body := apiDo(t, ctx, base, "POST", "/v1/hosts/BUILD-01/shares", admin, `{"port":`+port+`,"ttlSeconds":600}`); code != http.StatusCreated {
			t.Fatalf("share of BUILD-01:%s: %d %s", port, code, body)
		}
	}
	share("3000")
	share("5173")
	out, err := cli(t, ctx, "host", "remove", "BUILD-01", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"host BUILD-01: removed", "revoked its agent token(s): twin-agent", "client token(s) naming it, left as they are: laptop",
		"ended its public shares of port(s) 3000, 5173"} {
		if !strings.Contains(out, want) {
			t.Errorf("host remove said %q, want %q in it", out, want)
		}
	}
	// within waits up to 10 s for what a running gateway sees a moment
	// after the remove.
	within := func(what string, ok func(code int, body string) bool, host, path, token string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			code, body := get(host, path, token)
			if ok(code, body) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s 10 s after the remove: %d %.300s", what, code, body)
			}
		}
	}
	// Its agent, still connected, is cut at the next token recheck.
	within("hosts, want build-01 alone", func(code int, body string) bool {
		return code == http.StatusOK && !strings.Contains(body, `"BUILD-01"`) && strings.Contains(body, `"build-01"`)
	}, "", "/v1/hosts", admin)
	// The preview's host lookup may answer from a cache up to a second old.
	within("the subdomain, still ambiguous", func(_ int, body string) bool { return !strings.Contains(body, "ambiguous_host") }, sub, "/", "")
	// The twin's token is gone (a token looked up less than a second ago
	// may still pass): its agent enrolls nothing.
	within("the removed host's agent token at /v1/agents/connect, want 401", func(code int, _ string) bool { return code == http.StatusUnauthorized },
		"", "/v1/agents/connect", upper)
	// A sandbox's host goes with its execution, not by this command.
	st, _, err := openAdminState(ctx, dir, true, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if shares, err := st.Shares(ctx); err != nil || len(shares) != 0 {
		t.Errorf("shares in the state dir after the remove: %v, %v; want none", shares, err)
	}
	_, err = st.Enroll(ctx, store.Enrollment{HostID: "sbx-1", Kind: store.KindDocker, HostKey: "ssh-ed25519 AAAA"})
	_ = st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli(t, ctx, "host", "remove", "sbx-1", "--state-dir", dir); err == nil || !strings.Contains(err.Error(), "DELETE /v1/executions/sbx-1") {
		t.Errorf("remove of a sandbox's host: %v, want a refusal naming DELETE /v1/executions/sbx-1", err)
	}
	if _, err := cli(t, ctx, "host", "remove", "BUILD-01", "--state-dir", dir); err == nil || !strings.Contains(err.Error(), `no host "BUILD-01" (host ids are case-sensitive: build-01)`) {
		t.Errorf("a second remove: %v, want no host, naming build-01", err)
	}
}

// TestHostResetKeySandbox: `gateway host reset-key` leaves a sandbox's
// host key alone and says why. The gateway pins a sandbox's key when it
// starts the sandbox's agent, and no agent enrolls one: a reset left the
// sandbox answering 409 host_key_reset to every certificate request (no
// SSH, no terminal) for as long as it ran, while the command said the
// next agent to enroll would pin a key.
func TestHostResetKeySandbox(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	st, _, err := openAdminState(ctx, dir, true, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBfCpEoL1n6R3Qn0VbOZ5d3Z9mHq6l3v0yJ8a0k4x1cL"
	_, err = st.Enroll(ctx, store.Enrollment{HostID: "sbx-1", Kind: store.KindDocker, HostKey: key})
	_ = st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli(t, ctx, "host", "reset-key", "sbx-1", "--state-dir", dir); err == nil || !strings.Contains(err.Error(), "sandbox") {
		t.Errorf("reset-key of a sandbox's host: %v, want a refusal saying it is a sandbox's", err)
	}
	st, _, err = openAdminState(ctx, dir, true, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if h, err := st.Host(ctx, "sbx-1"); err != nil || h.HostKey != key {
		t.Errorf("the sandbox's host after the reset-key: key %q, %v; want its pinned key kept", h.HostKey, err)
	}
}

// TestTokenCreateCaseTwin: a token made for a host id that differs only
// in case from an enrolled host's is made, with a warning naming the
// enrolled one; a host not enrolled yet gets none.
func TestTokenCreateCaseTwin(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	st, _, err := openAdminState(ctx, dir, true, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Enroll(ctx, store.Enrollment{HostID: "build-01", Kind: "machine", HostKey: authorizedHostKey(t)})
	_ = st.Close()
	if err != nil {
		t.Fatal(err)
	}
	create := func(args ...string) (string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(ctx, stdio{in: strings.NewReader(""), out: &out, err: &errb}, append([]string{"token", "create", "--state-dir", dir}, args...)); err != nil {
			t.Fatalf("token create %v: %v %s", args, err, errb.String())
		}
		return lastLine(out.String()), errb.String()
	}
	for _, role := range []string{"client", "agent"} {
		secret, warn := create("--role", role, "--host", "Build-01")
		if !strings.HasPrefix(secret, store.TokenPrefix) {
			t.Errorf("%s token for Build-01: last line %q, want the token", role, secret)
		}
		if !strings.Contains(warn, `no host "Build-01" is enrolled, but build-01 is`) || !strings.Contains(warn, "--host build-01") {
			t.Errorf("%s token for Build-01 beside build-01: stderr %q, want a warning naming build-01", role, warn)
		}
	}
	for _, host := range []string{"build-01", "build-02"} {
		if _, warn := create("--role", "client", "--host", host); warn != "" {
			t.Errorf("client token for %s: stderr %q, want none", host, warn)
		}
	}
}

// failDeleteHost is a store whose DeleteHost fails.
type failDeleteHost struct{ store.Store }

func (failDeleteHost) DeleteHost(context.Context, string, string) error {
	return errors.New("database is locked")
}

// TestHostRemoveFailsLate: a remove whose last step fails says what it
// did already (its agent tokens are revoked, for good) and what to do.
// It answered the store's error alone, and an admin reading it took
// nothing for done, while the host's agent could no longer connect.
func TestHostRemoveFailsLate(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	st, _, err := openAdminState(ctx, dir, true, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Enroll(ctx, store.Enrollment{HostID: "build-01", Kind: "machine", HostKey: authorizedHostKey(t)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateToken(ctx, store.TokenSpec{Name: "build-agent", Role: store.RoleAgent, Hosts: []string{"build-01"}}); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err = removeHost(ctx, stdio{in: strings.NewReader(""), out: &out, err: &errb}, failDeleteHost{st}, "build-01")
	if err == nil {
		t.Fatal("remove with a failing DeleteHost succeeded")
	}
	for _, want := range []string{"database is locked", "build-agent", "revoked already", "gateway host remove build-01 again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("remove failing at its last step: %q, want %q in it", err, want)
		}
	}
}

// TestTokenListQuotesNames: a token name stored before names were
// checked, with a newline and tabs, is listed quoted on its token's own
// row, not as a row of its own.
func TestTokenListQuotesNames(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	st, _, err := openAdminState(ctx, dir, true, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, tok, err := st.CreateToken(ctx, store.TokenSpec{Name: "ci", Role: store.RoleClient, Hosts: []string{"h1"}})
	_ = st.Close()
	if err != nil {
		t.Fatal(err)
	}
	// As an older gateway stored it.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, dbFile)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(ctx, `UPDATE tokens SET name = ? WHERE id = ?`, "ci\nffffffffffff\troot\tadmin", tok.ID)
	_ = db.Close()
	if err != nil {
		t.Fatal(err)
	}
	list, err := cli(t, ctx, "token", "list", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(list), "\n"); len(lines) != 2 || !strings.Contains(lines[1], tok.ID) || !strings.Contains(lines[1], `"ci\nffffffffffff\troot\tadmin"`) {
		t.Errorf("token list:\n%s\nwant the header and one row, the name quoted", list)
	}
}
