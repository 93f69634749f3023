package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
)

var tokenIDRE = regexp.MustCompile(`\(id ([0-9a-f]+)\)`)

// TestRevokedTokenEndsSessions: `gateway token revoke`, run while the
// gateway serves, ends what the token opened: an SSH session through the
// relay (its running command fails) and a web terminal (told why, then
// closed). Sessions opened with other tokens go on.
func TestRevokedTokenEndsSessions(t *testing.T) {
	g := startGateway(t, "", "--token-recheck", "200ms")
	g.startAgent("alpha", "")
	ctx := testCtx(t, 2*time.Minute)

	out, err := exec.Command(bin.gateway, "token", "create", "--role", "client", "--host", "alpha", "--name", "doomed", "--state-dir", g.stateDir).Output()
	if err != nil {
		t.Fatal(err)
	}
	m := tokenIDRE.FindStringSubmatch(string(out))
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if m == nil {
		t.Fatalf("no token id in %q", out)
	}
	doomed, doomedID := strings.TrimSpace(lines[len(lines)-1]), m[1]

	h, err := client.Dial(ctx, g.url, doomed, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	p, err := h.Spawn(ctx, []string{"sleep", "600"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()

	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+doomed)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.url, "http")+"/v1/hosts/alpha/pty", &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	// The answer, not the echo of what was typed, proves the shell runs.
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("echo $((6*7))\n")); err != nil {
		t.Fatal(err)
	}
	if err := readUntil(ctx, ws, "42"); err != nil {
		t.Fatalf("terminal: %v", err)
	}

	other, err := client.Dial(ctx, g.url, g.admin, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	if out, err := exec.Command(bin.gateway, "token", "revoke", doomedID, "--state-dir", g.stateDir).CombinedOutput(); err != nil {
		t.Fatalf("revoke: %v: %s", err, out)
	}
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	select {
	case err := <-waited:
		var ee *hostgate.ExitError
		if err == nil || errors.As(err, &ee) {
			t.Fatalf("the revoked token's command ended with %v, want a lost connection", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the revoked token's command still runs after 60 s")
	}
	if err := readUntil(ctx, ws, "revoked"); err != nil {
		t.Fatalf("terminal after revocation: %v", err)
	}
	if res, err := other.Exec(ctx, []string{"echo", "still"}, hostgate.ExecOptions{}); err != nil || string(res.Stdout) != "still\n" {
		t.Fatalf("another token's session after the revocation: %v", err)
	}
	if _, err := client.Dial(ctx, g.url, doomed, "alpha"); err == nil {
		t.Fatal("the revoked token dials again")
	}
}

// readUntil reads terminal messages until one contains want.
func readUntil(ctx context.Context, ws *websocket.Conn, want string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var seen strings.Builder
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return fmt.Errorf("%w (saw %q)", err, seen.String())
		}
		seen.Write(b)
		if strings.Contains(seen.String(), want) {
			return nil
		}
	}
}
