package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/sshlayer"
)

// TestAgentKilledMidSession: a command running through the gateway when
// its agent dies fails promptly for the caller (the relay closes with the
// tunnel); it does not hang until some keepalive gives up.
func TestAgentKilledMidSession(t *testing.T) {
	g := startGateway(t, "")
	a := g.startAgent("alpha", "")
	ctx := testCtx(t, 2*time.Minute)
	h, err := client.Dial(ctx, g.url, g.admin, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	p, err := h.Spawn(ctx, []string{"sh", "-c", "sleep 601 & echo $$ $!; exec sleep 600"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	var pid, child int
	if _, err := fmt.Fscan(p.Stdout(), &pid, &child); err != nil {
		t.Fatalf("process did not start: %v", err)
	}
	// Should the guard fail, nothing outlives the test.
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL); _ = syscall.Kill(child, syscall.SIGKILL) })
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()

	a.kill()
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	select {
	case err := <-waited:
		if err == nil {
			t.Fatal("a command whose agent died reports a clean exit")
		}
		var ee *hostgate.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("a command whose agent died reports an exit status: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a command whose agent died still waits after 60s")
	}
	if _, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err == nil {
		t.Fatal("the host's connection still runs commands after its agent died")
	} else if !strings.HasPrefix(err.Error(), "host alpha: connection ended (connect again): ") || !strings.Contains(err.Error(), "its agent disconnected from the gateway") {
		t.Errorf("exec after the agent died: %v; want it to start with host alpha and what to do, and to carry the gateway's word that its agent disconnected", err)
	}
	// The agent's guard kills what the dead agent's sessions ran: the
	// command and the child it put in the background.
	for _, id := range []int{pid, child} {
		if !waitProcessGone(id, 30*time.Second) {
			t.Errorf("process %d outlived its SIGKILLed agent by 30 s", id)
		}
	}
}

// waitProcessGone reports whether pid is gone (or a zombie) within d.
func waitProcessGone(pid int, d time.Duration) bool {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		// "pid (comm) S …": the state follows the last ')'.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return true
		}
		select {
		case <-deadline:
			return false
		case <-tick.C:
		}
	}
}

// TestImpostorWhileOffline: the pin outlives the tunnel: with the real
// agent down, an agent with another key is still refused and the host
// stays offline; the real agent, restarted on its state dir, is accepted.
func TestImpostorWhileOffline(t *testing.T) {
	g := startGateway(t, "")
	realDir := t.TempDir()
	a := g.startAgent("alpha", realDir)
	rec, err := g.hostRecord("alpha")
	if err != nil {
		t.Fatal(err)
	}
	a.stop()
	if a.err != nil {
		t.Fatalf("agent did not stop cleanly on SIGTERM: %v", a.err)
	}
	g.waitConnected("alpha", false, 60*time.Second)

	// --max-backoff: a refused agent waits its longest backoff (15 to 30 s
	// by default) before the second refusal this test waits for.
	imp := start(t, "impostor alpha", bin.agent, nil, "connect", "--gateway", g.url,
		"--token", g.token("agent", "alpha"), "--host-id", "alpha", "--state-dir", t.TempDir(), "--max-backoff", "1s")
	// The impostor and the gateway log the refusal once; the gateway
	// counts each, so the second shows it asked again.
	imp.waitFor(regexp.MustCompile(`host_key_mismatch`), 60*time.Second)
	g.waitFor(regexp.MustCompile(`agent refused: host key differs`), 60*time.Second)
	waitMetricAtLeast(t, g, `hostgate_agent_refusals_total{reason="key_mismatch"}`, 2)
	if r, err := g.hostRecord("alpha"); err != nil || r.Connected || r.HostKey != rec.HostKey {
		t.Fatalf("host after the impostor's attempts: %+v %v (want offline, pin %s)", r, err, rec.HostKey)
	}
	ctx := testCtx(t, time.Minute)
	if _, err := client.Dial(ctx, g.url, g.admin, "alpha"); !errors.Is(err, client.ErrOffline) {
		t.Fatalf("dial while only the impostor tries: %v, want ErrOffline", err)
	}
	imp.stop()

	g.startAgent("alpha", realDir)
	execEcho(t, ctx, g.url, g.admin, "alpha", "real-again")
}

// TestStreamLimitPerTunnel: a host's tunnel carries at most 256 relayed
// sessions; the next caller gets a clear 503, and closed sessions give
// their slots back (no leak after a full cycle).
func TestStreamLimitPerTunnel(t *testing.T) {
	const limit = 256 // internal/gateway's default MaxStreamsPerTunnel
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	g.startAgent("beta", "")
	ctx := testCtx(t, 3*time.Minute)
	c, err := client.New(g.url, g.admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Host(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	key, err := sshlayer.GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := c.Certificate(ctx, "alpha", key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	auth := sshlayer.Auth{Signer: key.Signer, Certificate: []byte(cert.Certificate), HostKey: rec.HostKey}

	// Fill the tunnel with real SSH connections (raw streams would be
	// closed by the agent's 10 s handshake timeout on a slow machine).
	conns := make([]*sshlayer.Client, limit)
	errs := make([]error, limit)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range limit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			conn, err := c.DialSSH(ctx, "alpha")
			if err != nil {
				errs[i] = err
				return
			}
			if conns[i], err = sshlayer.Connect(ctx, conn, auth); err != nil {
				conn.Close()
				errs[i] = err
			}
		}()
	}
	wg.Wait()
	closeAll := func() {
		for _, sc := range conns {
			if sc != nil {
				sc.Close()
			}
		}
	}
	defer closeAll()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("session %d of %d: %v", i, limit, err)
		}
	}

	// One more: a 503 naming the reason, at once.
	conn, err := c.DialSSH(ctx, "alpha")
	var he *bytestream.HandshakeError
	if err == nil {
		conn.Close()
		t.Fatalf("session %d on one tunnel was accepted", limit+1)
	}
	if !errors.As(err, &he) || he.StatusCode != http.StatusServiceUnavailable || !strings.Contains(he.Body, "too_many_streams") {
		t.Fatalf("session %d: %v, want 503 too_many_streams", limit+1, err)
	}
	// The limit is per tunnel: another host is unaffected, and the full
	// host's sessions still work.
	execEcho(t, ctx, g.url, g.admin, "beta", "other-tunnel")
	s, err := conns[0].SSH().NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.Output("echo still"); err != nil || string(out) != "still\n" {
		t.Fatalf("a session on the full tunnel: %q %v", out, err)
	}
	s.Close()

	// Close them all: every slot comes back. Slots are released when each
	// relay notices its end, so a 503 is retried until a bounded deadline.
	closeAll()
	raws := make([]net.Conn, 0, limit)
	defer func() {
		for _, r := range raws {
			r.Close()
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for len(raws) < limit {
		conn, err := c.DialSSH(ctx, "alpha")
		if err == nil {
			raws = append(raws, conn)
			continue
		}
		if !errors.As(err, &he) || he.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("after closing %d sessions only %d slots came back: %v", limit, len(raws), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, r := range raws {
		r.Close()
	}
	raws = nil
	// And a normal session works again once they are gone.
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		h, err := client.Dial(dctx, g.url, g.admin, "alpha")
		if err == nil {
			res, err := h.Exec(dctx, []string{"echo", "free"}, hostgate.ExecOptions{})
			h.Close()
			if err != nil || string(res.Stdout) != "free\n" {
				t.Fatalf("exec after the cycle: %+v %v", res, err)
			}
			break
		}
		if !errors.As(err, &he) || he.StatusCode != http.StatusServiceUnavailable || dctx.Err() != nil {
			t.Fatalf("dial after the cycle: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSlowCallerDoesNotStall: a caller that stops reading a command's
// large output holds back only its own session; other sessions on the
// same tunnel and on another tunnel keep moving data.
func TestSlowCallerDoesNotStall(t *testing.T) {
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	g.startAgent("beta", "")
	ctx := testCtx(t, 2*time.Minute)

	slow, err := client.Dial(ctx, g.url, g.admin, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	// 1 GiB of output nobody reads: it fills the windows on its path.
	p, err := slow.Spawn(ctx, []string{"head", "-c", "1073741824", "/dev/zero"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Kill(hostgate.SIGKILL) }()
	// Read a little, so the flow is known to have started, then stop.
	if _, err := io.ReadFull(p.Stdout(), make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}

	// Meanwhile: 8 MiB of work and 8 MiB of output through a new session
	// on the same tunnel and one on another tunnel.
	for _, id := range []string{"alpha", "beta"} {
		h, err := client.Dial(ctx, g.url, g.admin, id)
		if err != nil {
			t.Fatal(err)
		}
		res, err := h.Exec(ctx, []string{"sh", "-c", "head -c 8388608 /dev/zero | wc -c"}, hostgate.ExecOptions{})
		if err != nil || strings.TrimSpace(string(res.Stdout)) != "8388608" {
			t.Fatalf("%s while a caller stalls: %+v %v", id, res, err)
		}
		out, err := h.Exec(ctx, []string{"head", "-c", "8388608", "/dev/zero"}, hostgate.ExecOptions{MaxOutput: 16 << 20})
		if err != nil || len(out.Stdout) != 8<<20 {
			t.Fatalf("%s: 8 MiB of output while a caller stalls: %d bytes, %v", id, len(out.Stdout), err)
		}
		h.Close()
	}
}

// TestAgentStopsCleanly: SIGTERM to an agent with a command running
// through it ends the agent cleanly (exit 0, bounded), takes the
// command's whole process tree with it, and the caller and the gateway
// both see the end.
func TestAgentStopsCleanly(t *testing.T) {
	g := startGateway(t, "")
	a := g.startAgent("alpha", "")
	ctx := testCtx(t, 2*time.Minute)
	h, err := client.Dial(ctx, g.url, g.admin, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// A shell and a background child; both pids are printed.
	p, err := h.Spawn(ctx, []string{"sh", "-c", "sleep 600 & echo $$ $!; wait"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	var shPID, childPID int
	if _, err := fmt.Fscan(p.Stdout(), &shPID, &childPID); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	for _, pid := range []int{shPID, childPID} {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			t.Fatalf("pid %d not running before the stop: %v", pid, err)
		}
	}

	a.stop() // SIGTERM; SIGKILL after 10 s would show as an error
	if a.err != nil {
		t.Fatalf("agent with a running session did not exit cleanly on SIGTERM: %v", a.err)
	}
	// The agent says it stops, and why, and tells the gateway, whose
	// log says the agent stopped: it said err=EOF, and the agent's
	// nothing (found by the tunnellogs32 audit).
	if out := a.output(); !strings.Contains(out, `msg="agent stopping: `) || !strings.Contains(out, `cause="terminated signal received"`) {
		t.Errorf("the agent's log does not say it stops on SIGTERM:\n%s", out)
	}
	g.waitFor(regexp.MustCompile(`msg="tunnel down" host=alpha .*reason="the agent stopped"`), 30*time.Second)
	for _, pid := range []int{shPID, childPID} {
		// The agent waited for its sessions, so they are gone or zombies
		// of a parent that is gone (reaped by init soon after).
		deadline := time.Now().Add(30 * time.Second)
		for {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil || strings.Contains(string(b), ") Z ") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pid %d (%s) outlived its agent", pid, b)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	select {
	case err := <-waited:
		var ee *hostgate.ExitError
		if err == nil || (errors.As(err, &ee) && ee.Code == 0) {
			t.Fatalf("the caller's command reports success after its agent stopped: %v", err)
		}
		// The tunnel ends before the agent's SSH connections, so the
		// caller learns why: a connection that closed first made it a
		// plain "connection lost: EOF" in about 1 run of 3.
		if err == nil || !strings.HasPrefix(err.Error(), "host alpha: connection ended (connect again): ") || !strings.Contains(err.Error(), "its agent disconnected") {
			t.Errorf("the caller's error after its agent stopped: %v, want it to say the host's agent disconnected", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the caller's command still waits 60s after its agent stopped")
	}
	g.waitConnected("alpha", false, 60*time.Second)
}

// TestSilentCallersAreCut: a connection that sends half a request header,
// and an SSH WebSocket that never starts its SSH handshake, are both
// closed by the gateway's and the agent's handshake bounds, so silent
// peers cannot pile up.
func TestSilentCallersAreCut(t *testing.T) {
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	ctx := testCtx(t, 2*time.Minute)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Half a header; the read deadline (30 s) bounds the wait.
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(g.url, "http://"), 10*time.Second)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		if _, err := conn.Write([]byte("GET /v1/hosts HTTP/1.1\r\nHost: x\r\n")); err != nil {
			t.Error(err)
			return
		}
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err = io.ReadAll(conn)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Error("a half-sent request header kept its connection for 30s")
		}
	}()

	// An SSH stream whose caller only listens.
	c, err := client.New(g.url, g.admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := c.DialSSH(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(45 * time.Second))
	banner, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("an SSH stream that never started its handshake was kept for 45s (read %q)", banner)
	}
	if !strings.HasPrefix(string(banner), "SSH-2.0-") {
		t.Fatalf("the stream did not reach the agent's SSH server: %q %v", banner, err)
	}
	wg.Wait()
	waitMetric(t, g, "hostgate_streams_open", 0)
	execEcho(t, ctx, g.url, g.admin, "alpha", "after-silent")
}
