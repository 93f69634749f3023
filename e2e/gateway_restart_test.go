package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
	syncfs "github.com/hostgate/hostgate/sync"
)

// restartSamePort stops the gateway (SIGTERM) and starts it again on the
// address it had, so agents, which dial the URL they were given, can come
// back. The port may be briefly unavailable after the old process exits;
// a start that fails to listen is retried a few times. extra are serve's
// flags beyond the listen address, state dir and --docker off.
func (g *gw) restartSamePort(t *testing.T, extra ...string) {
	t.Helper()
	addr := strings.TrimPrefix(g.url, "http://")
	g.proc.stop()
	if g.proc.err != nil {
		t.Fatalf("gateway did not exit cleanly on SIGTERM: %v\n%s", g.proc.err, g.proc.output())
	}
	for attempt := 1; ; attempt++ {
		p := start(t, "gateway (restarted)", bin.gateway, nil,
			append([]string{"serve", "--listen", addr, "--state-dir", g.stateDir, "--docker", "off"}, extra...)...)
		deadline := time.After(30 * time.Second)
	wait:
		for {
			if m := servingRE.FindStringSubmatch(p.output()); m != nil {
				if m[1] != addr {
					t.Fatalf("restarted gateway serves on %s, want %s", m[1], addr)
				}
				g.proc = p
				return
			}
			select {
			case <-p.done:
				if attempt >= 5 || !strings.Contains(p.output(), "address already in use") {
					t.Fatalf("restarted gateway exited (%v):\n%s", p.err, p.output())
				}
				t.Logf("restart attempt %d: port busy, retrying", attempt)
				break wait
			case <-deadline:
				t.Fatalf("restarted gateway did not serve within 30s:\n%s", p.output())
			case <-time.After(20 * time.Millisecond):
			}
		}
		// Back off between attempts (not a readiness poll: the port is
		// held by the kernel, not by anything we could wait on).
		<-time.After(time.Duration(attempt) * 200 * time.Millisecond)
	}
}

// execEcho runs `echo word` on host id through a fresh Go client session
// and checks the output.
func execEcho(t *testing.T, ctx context.Context, url, token, id, word string) {
	t.Helper()
	h, err := client.Dial(ctx, url, token, id)
	if err != nil {
		t.Fatalf("dial %s: %v", id, err)
	}
	defer h.Close()
	res, err := h.Exec(ctx, []string{"echo", word}, hostgate.ExecOptions{})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != word+"\n" {
		t.Fatalf("exec on %s: %+v %v", id, res, err)
	}
}

// TestGatewayRestart: the gateway restarts on its address and state dir;
// agents come back by themselves, pins and tokens survive, and a new
// session works.
func TestGatewayRestart(t *testing.T) {
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	g.startAgent("beta", "")
	clientTok := g.token("client", "alpha")
	ctx := testCtx(t, 3*time.Minute)

	pins := map[string]string{}
	for _, id := range []string{"alpha", "beta"} {
		rec, err := g.hostRecord(id)
		if err != nil || rec.HostKey == "" || !strings.HasPrefix(rec.HostKey, "SHA256:") {
			t.Fatalf("host %s before restart: %+v %v", id, rec, err)
		}
		pins[id] = rec.HostKey
	}
	execEcho(t, ctx, g.url, clientTok, "alpha", "before")

	// A session open across the restart ends with the gateway (its relay
	// is closed), rather than hanging.
	live, err := client.Dial(ctx, g.url, g.admin, "beta")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	// A host of a client made with Reconnect connects again on its next
	// use after the restart.
	rc, err := client.New(g.url, g.admin, &client.Options{Reconnect: true})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := rc.Dial(ctx, "beta")
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	keptConn, err := kept.Connection(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Its sync FS too: its own connection ends with the gateway, and its
	// first call after the restart connects again rather than failing.
	sfs := syncfs.FromHost(kept, nil)
	defer sfs.Close()
	if _, err := sfs.Stat("tmp"); err != nil {
		t.Fatalf("sync FS before the restart: %v", err)
	}

	g.restartSamePort(t)

	for _, id := range []string{"alpha", "beta"} {
		// Backoff starts at 0.5 s and doubles; a loaded machine needs slack.
		g.waitConnected(id, true, 90*time.Second)
		rec, err := g.hostRecord(id) // the admin token from before the restart
		if err != nil {
			t.Fatal(err)
		}
		if rec.HostKey != pins[id] {
			t.Fatalf("host %s pin changed across restart: %s, was %s", id, rec.HostKey, pins[id])
		}
	}
	execEcho(t, ctx, g.url, clientTok, "alpha", "after-client")
	execEcho(t, ctx, g.url, g.admin, "beta", "after-admin")
	select {
	case <-keptConn.Done:
	case <-time.After(30 * time.Second):
		t.Fatal("the reconnecting host's connection did not end with the gateway")
	}
	if res, err := kept.Exec(ctx, []string{"echo", "reconnected"}, hostgate.ExecOptions{}); err != nil || string(res.Stdout) != "reconnected\n" {
		t.Fatalf("a Reconnect host's first use after the restart: %+v %v, want it to connect again", res, err)
	}
	if c, err := kept.Connection(ctx); err != nil || c == keptConn {
		t.Fatalf("a Reconnect host after the restart: %v, still its lost connection %v", err, c == keptConn)
	}
	if _, err := sfs.Stat("tmp"); err != nil {
		t.Fatalf("the sync FS's first call after the restart: %v, want it to connect again", err)
	}

	ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := live.Exec(ectx, []string{"true"}, hostgate.ExecOptions{}); err == nil {
		t.Fatal("a session from before the restart still runs commands; its relay should have ended")
	} else if ectx.Err() != nil {
		t.Fatalf("a session from before the restart hangs instead of failing: %v", err)
	}
}

// TestAgentKilled: an agent killed with SIGKILL reads connected: false,
// and callers get a clear error quickly, not a hang.
func TestAgentKilled(t *testing.T) {
	g := startGateway(t, "")
	a := g.startAgent("alpha", "")
	g.startAgent("beta", "")
	ctx := testCtx(t, 2*time.Minute)
	execEcho(t, ctx, g.url, g.admin, "alpha", "up")

	a.kill()
	g.waitConnected("alpha", false, 60*time.Second)

	// client.Dial: an error naming the host as offline, well before its
	// context's deadline.
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	h, err := client.Dial(dctx, g.url, g.admin, "alpha")
	if err == nil {
		h.Close()
		t.Fatal("dial to a killed agent's host succeeded")
	}
	if dctx.Err() != nil {
		t.Fatalf("dial to an offline host hung until its deadline: %v", err)
	}
	if !errors.Is(err, client.ErrOffline) || !strings.Contains(err.Error(), "offline") || !strings.Contains(err.Error(), "alpha") {
		t.Fatalf("dial to an offline host: want client.ErrOffline naming alpha, got %v", err)
	}

	// gateway proxy (OpenSSH's ProxyCommand): exits non-zero at once with
	// a message a person understands.
	pctx, cancel2 := context.WithTimeout(ctx, 30*time.Second)
	defer cancel2()
	cmd := exec.CommandContext(pctx, bin.gateway, "proxy", "--url", g.url, "--token", g.admin, "alpha")
	cmd.Stdin = strings.NewReader("SSH-2.0-OpenSSH_9.9\r\n")
	out, err := cmd.CombinedOutput()
	if pctx.Err() != nil {
		t.Fatalf("gateway proxy to an offline host hung: %v %q", err, out)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("gateway proxy to an offline host: want a non-zero exit, got %v %q", err, out)
	}
	if !regexp.MustCompile(`(?i)alpha.*(offline|not connected)|(offline|not connected).*alpha`).Match(out) {
		t.Fatalf("gateway proxy to an offline host: unclear message %q", out)
	}

	// The other host is unaffected.
	execEcho(t, ctx, g.url, g.admin, "beta", "still")
}

// TestAgentRefusesNewCA: a gateway that comes back with another user CA
// (its CA key lost or swapped, the database kept) is not trusted by an
// agent that pinned the first one: the agent says why and serves nothing
// signed by the new CA.
func TestAgentRefusesNewCA(t *testing.T) {
	g := startGateway(t, "")
	a := g.startAgent("alpha", "")
	ctx := testCtx(t, 3*time.Minute)
	execEcho(t, ctx, g.url, g.admin, "alpha", "first-ca")

	g.proc.stop()
	if err := os.Remove(filepath.Join(g.stateDir, "ca_key")); err != nil {
		t.Fatal(err)
	}
	g.restartSamePort(t) // a new CA is made on start
	a.waitFor(regexp.MustCompile(`gateway CA differs from the pinned one`), 90*time.Second)

	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	h, err := client.Dial(dctx, g.url, g.admin, "alpha")
	if err == nil {
		res, xerr := h.Exec(dctx, []string{"echo", "new-ca"}, hostgate.ExecOptions{})
		h.Close()
		t.Fatalf("an agent pinned to the old CA accepted a session with the new CA's certificate: %+v %v", res, xerr)
	}
	if dctx.Err() != nil {
		t.Fatalf("dial to an agent that refuses the gateway hung: %v", err)
	}
	// The caller hears why: the agent's reason, not "not connected" alone
	// (once the gateway has read the agent's close: the agent logs first).
	for end := time.Now().Add(30 * time.Second); !strings.Contains(err.Error(), "its agent refused this gateway") || !strings.Contains(err.Error(), "CA differs"); {
		if !errors.Is(err, client.ErrOffline) || time.Now().After(end) {
			t.Fatalf("dial while the agent refuses the new CA: %v, want offline saying the agent refuses the gateway's CA", err)
		}
		time.Sleep(200 * time.Millisecond)
		if h, err = client.Dial(dctx, g.url, g.admin, "alpha"); err == nil {
			h.Close()
			t.Fatal("an agent pinned to the old CA was dialed")
		}
	}
}
