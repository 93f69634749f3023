//go:build unix

package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/store"
)

// Each `gateway dev` start revokes the tokens of the one before: they
// never expire, and they piled up, every printed admin token still valid.
func TestDevTokensReplaced(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	admin1, agent1, err := devTokens(ctx, dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	admin2, _, err := devTokens(ctx, dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := openState(ctx, dir, func(store.TightenedFile) {})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, old := range []string{admin1, agent1} {
		if _, err := st.LookupToken(ctx, old); err == nil {
			t.Error("a token of the earlier start still works")
		}
	}
	if _, err := st.LookupToken(ctx, admin2); err != nil {
		t.Errorf("the new admin token: %v", err)
	}
	toks, err := st.Tokens(ctx)
	if err != nil || len(toks) != 2 {
		t.Errorf("%d tokens after two starts (%v), want 2", len(toks), err)
	}
}

// A second `gateway dev` on a state dir in use stops before it touches
// the running one's tokens.
func TestDevSecondLeavesFirstTokens(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	unlock, err := lockStateDir(dir) // the running gateway dev
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	admin, _, err := devTokens(ctx, dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err = run(ctx, stdio{in: strings.NewReader(""), out: &out, err: &errb}, []string{"dev", "--state-dir", dir, "--listen", "127.0.0.1:0", "--docker", "off"})
	if err == nil || !strings.Contains(err.Error(), "another gateway is serving") {
		t.Fatalf("second gateway dev: %v, want it refused", err)
	}
	st, _, err := openState(ctx, dir, func(store.TightenedFile) {})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.LookupToken(ctx, admin); err != nil {
		t.Errorf("the running gateway's admin token after a refused second start: %v", err)
	}
}

// The ssh command gateway dev prints must outlive the dev run: under `go
// run` the binary is in go's build cache dir, deleted when dev stops, so a
// copy in the state dir goes into the command instead.
func TestDevProxyBinary(t *testing.T) {
	dir := t.TempDir()
	built := filepath.Join(t.TempDir(), "go-build1234", "b001", "exe", "gateway")
	if err := os.MkdirAll(filepath.Dir(built), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(built, []byte("#!/bin/sh\necho proxied\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := proxyBinary(dir, built)
	if err != nil {
		t.Fatal(err)
	}
	if got != filepath.Join(dir, "bin", "gateway") {
		t.Fatalf("proxy binary %q, want a copy in the state dir", got)
	}
	if err := os.RemoveAll(filepath.Dir(filepath.Dir(filepath.Dir(built)))); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(got).Output(); err != nil || string(out) != "proxied\n" {
		t.Fatalf("the copy after go's build dir went: %q %v", out, err)
	}
	if got, err := proxyBinary(dir, "/usr/local/bin/gateway"); err != nil || got != "/usr/local/bin/gateway" {
		t.Fatalf("an installed binary: %q %v, want it as it is", got, err)
	}
}

// readyWriter is the output of a gateway dev run in a test: it closes
// ready once the run has printed what the person needs.
type readyWriter struct {
	mu    sync.Mutex
	b     bytes.Buffer
	ready chan struct{}
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.b.String(), "Stop with Ctrl-C.")
	w.b.Write(p)
	if !had && strings.Contains(w.b.String(), "Stop with Ctrl-C.") {
		close(w.ready)
	}
	return len(p), nil
}

// startDev runs `gateway dev` on dir until ctx ends, and returns once it
// has printed what the person needs; done gets run's error.
func startDev(t *testing.T, ctx context.Context, dir string) (out *readyWriter, done chan error) {
	t.Helper()
	out = &readyWriter{ready: make(chan struct{})}
	done = make(chan error, 1)
	go func() {
		done <- run(ctx, stdio{in: strings.NewReader(""), out: out, err: io.Discard}, []string{"dev", "--state-dir", dir, "--listen", "127.0.0.1:0", "--docker", "off"})
	}()
	select {
	case <-out.ready:
	case err := <-done:
		t.Fatalf("gateway dev: %v", err)
	}
	return out, done
}

// The admin token an earlier `gateway dev` start printed is refused with
// words for it: it said "no such token (mistyped, revoked, or made with
// another --state-dir); ask its admin for one", which sent the person who
// is the admin looking for one, where the fix is the token this start
// printed (found walking the README's quick start).
func TestDevEarlierAdminTokenSaysWhy(t *testing.T) {
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	dir := t.TempDir()
	earlier, _, err := devTokens(ctx, dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	out, done := startDev(t, ctx, dir)
	out.mu.Lock()
	m := regexp.MustCompile(`web UI: +(http://\S+)/ `).FindStringSubmatch(out.b.String())
	out.mu.Unlock()
	if m == nil {
		t.Fatalf("gateway dev printed no web UI URL:\n%s", out.b.String())
	}
	code, body := apiDo(t, ctx, m[1], "GET", "/v1/hosts", earlier, "")
	for _, want := range []string{"gateway dev", "this start printed", "gateway token create --state-dir " + dir + " --role admin"} {
		if code != http.StatusUnauthorized || !strings.Contains(body, want) {
			t.Errorf("the earlier start's admin token: %d %s, want 401 saying %q", code, body, want)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("gateway dev: %v", err)
	}
}

// The printed ssh command's certificate is signed again while dev runs:
// the CA signs for at most a day, so a dev gateway left running stopped
// letting its own printed command in after that, with ssh's bare
// "Permission denied (publickey)".
func TestDevRenewsSSHCertificate(t *testing.T) {
	defer func(d time.Duration) { devCertRenew = d }(devCertRenew)
	devCertRenew = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	dir := t.TempDir()
	out, done := startDev(t, ctx, dir)
	path := filepath.Join(dir, "ssh", "id_ed25519-cert.pub")
	out.mu.Lock()
	printed := out.b.String()
	out.mu.Unlock()
	if !strings.Contains(printed, "CertificateFile="+path) {
		t.Fatalf("the printed ssh command does not read %s:\n%s", path, printed)
	}
	readCert := func() *ssh.Certificate {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		c, ok := pub.(*ssh.Certificate)
		if !ok {
			t.Fatalf("%s holds a %s, not a certificate", path, pub.Type())
		}
		return c
	}
	first := readCert()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c := readCert()
		if c.Serial != first.Serial {
			if !bytes.Equal(c.Key.Marshal(), first.Key.Marshal()) || c.ValidBefore < first.ValidBefore || c.KeyId != first.KeyId || !slices.Equal(c.ValidPrincipals, first.ValidPrincipals) {
				t.Errorf("renewed certificate: key %s, valid before %d, id %q, principals %q; want the printed key's, from %d on, as the first (%q %q)",
					ssh.FingerprintSHA256(c.Key), c.ValidBefore, c.KeyId, c.ValidPrincipals, first.ValidBefore, first.KeyId, first.ValidPrincipals)
			}
			break
		}
		if time.Now().After(deadline) { // a guard against a hang, not a timing
			t.Fatalf("the printed ssh command's certificate was not renewed in 30 s at a renewal every %v", devCertRenew)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("gateway dev: %v", err)
	}
}
