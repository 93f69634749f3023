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

	"github.com/coder/websocket"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
	syncfs "github.com/hostgate/hostgate/sync"
)

// agentUpRE is an agent's "tunnel up" line.
var agentUpRE = regexp.MustCompile(`msg="tunnel up"`)

// TestNetworkFaults runs the fault-proxy tests at once: each waits on
// keepalives (a minute or two) while it uses little CPU, and one after
// another they took 327 s of the suite.
func TestNetworkFaults(t *testing.T) {
	var wg sync.WaitGroup
	for _, ft := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"AgentPathStalls", testAgentPathStalls},
		{"ClientPathHalfOpen", testClientPathHalfOpen},
		{"SlowLinkBulkIntact", testSlowLinkBulkIntact},
		{"GatewayRestartWithEverythingOpen", testGatewayRestartWithEverythingOpen},
		{"ClientPathStallsMidFlood", testClientPathStallsMidFlood},
	} {
		// t.Run from several goroutines: past -parallel, which is 2 here.
		wg.Go(func() { t.Run(ft.name, ft.fn) })
	}
	wg.Wait()
}

// testAgentPathStalls: the path between an agent and the gateway stops
// forwarding (both ways, sockets left open: a NAT that lost its state, a
// laptop's Wi-Fi gone). A 5 s stall is ridden out: the host stays
// connected and a session opened before it goes on. A stall past the
// keepalive drops the host at the gateway, which says why; what a caller
// ran across it (a command, SFTP, a forward, a Dial and a sync FS call
// begun during the stall) fails naming the host and matching hostgate.ErrConnectionEnded
// rather than hanging; the command is killed on the host; and the agent,
// once the path heals, comes back by itself.
func testAgentPathStalls(t *testing.T) {
	g := startGateway(t, "")
	px := newFaultProxy(t, strings.TrimPrefix(g.url, "http://"))
	a := g.startAgentAt(px.URL(), "alpha", "")
	ctx := testCtx(t, 6*time.Minute)
	h := dialWorking(t, ctx, g, "alpha")
	defer h.Close()

	// A short stall: nothing notices but the latency.
	px.Stall()
	time.Sleep(5 * time.Second) // the stall itself, not a wait for an outcome
	px.Heal()
	if res, err := h.Exec(ctx, []string{"echo", "after-5s"}, hostgate.ExecOptions{}); err != nil || string(res.Stdout) != "after-5s\n" {
		t.Fatalf("exec on the session from before a 5 s stall: %+v %v", res, err)
	}
	if out := g.output(); strings.Contains(out, `msg="tunnel down"`) {
		t.Fatalf("a 5 s stall dropped the host's tunnel:\n%s", out)
	}
	if n := len(agentUpRE.FindAllString(a.output(), -1)); n != 1 {
		t.Fatalf("a 5 s stall made the agent connect again (%d tunnels up):\n%s", n, a.output())
	}

	// What runs across the long stall: a command, a file open for
	// writing, a forward.
	p, err := h.Spawn(ctx, []string{"sh", "-c", "echo $$; exec sleep 600"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	var pid int
	if _, err := fmt.Fscan(p.Stdout(), &pid); err != nil {
		t.Fatalf("command did not start: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	fsys, err := h.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create(ctx, t.TempDir()+"/across", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fw, err := h.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: echoServer(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	fc, err := net.Dial("tcp", fw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	if _, err := fc.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(fc, make([]byte, 5)); err != nil {
		t.Fatalf("forward before the stall: %v", err)
	}

	sfs := syncfs.FromHost(h, nil)
	defer sfs.Close()
	if _, err := sfs.Stat("tmp"); err != nil {
		t.Fatalf("sync FS before the stall: %v", err)
	}

	stalled := time.Now()
	px.Stall()
	// The sync FS's io/fs calls take no ctx: its own timeout ends one.
	synced := make(chan error, 1)
	go func() {
		_, err := sfs.Stat("tmp")
		synced <- err
	}()
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	// A caller who dials during the stall: the gateway still counts the
	// host as connected, so only the tunnel's end can answer it.
	dialed := make(chan error, 1)
	go func() {
		dh, err := client.Dial(ctx, g.url, g.admin, "alpha")
		if err == nil {
			_, err = dh.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
			dh.Close()
		}
		dialed <- err
	}()

	// The gateway's keepalive (a ping every 30 s, answered within 30 s).
	down := g.waitFor(regexp.MustCompile(`msg="tunnel down".*host=alpha.*reason="([^"]*)"`), 2*time.Minute)
	detected := time.Since(stalled)
	t.Logf("gateway dropped the host %v into the stall: %s", detected.Round(100*time.Millisecond), down[0])
	if !strings.Contains(down[1], "stopped answering") {
		t.Errorf("gateway's tunnel down for a stalled path: reason %q, want it to say the agent stopped answering", down[1])
	}
	g.waitConnected("alpha", false, 10*time.Second)

	ended := func(what string, err error) {
		t.Helper()
		switch {
		case err == nil:
			t.Errorf("%s across a stall that dropped the host: no error", what)
		case !errors.Is(err, hostgate.ErrConnectionEnded) || !strings.Contains(err.Error(), "alpha") || !strings.Contains(err.Error(), "connection lost") ||
			!strings.Contains(err.Error(), "its agent stopped answering"):
			t.Errorf("%s across a stall that dropped the host: %v; want an error naming host alpha, saying the connection was lost as its agent stopped answering, matching hostgate.ErrConnectionEnded", what, err)
		default:
			t.Logf("%s: %v", what, err)
		}
	}
	select {
	case err := <-waited:
		ended("a command's Wait", err)
	case <-time.After(30 * time.Second): // a guard against a hang, not a timing
		t.Fatal("a command across the stall still waits 30 s after the gateway dropped its host")
	}
	_, err = f.Write([]byte("after"))
	if err == nil {
		err = f.Close()
	}
	ended("an SFTP write", err)
	select {
	case <-fw.Done():
		// A forward's Err is hostgate.ErrConnectionEnded named with the
		// host; its listener's callers saw the connection's own error.
		if err := fw.Err(); !errors.Is(err, hostgate.ErrConnectionEnded) || !strings.Contains(err.Error(), "alpha") {
			t.Errorf("a forward across a stall that dropped the host: %v, want hostgate.ErrConnectionEnded naming host alpha", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("a forward across the stall still runs 30 s after the gateway dropped its host")
	}
	select {
	case err := <-dialed:
		// The gateway still counted the host as connected: the SSH
		// handshake's own bound ended it, and says so (it read "context
		// deadline exceeded", with minutes left on the caller's ctx).
		if err == nil || !strings.Contains(err.Error(), "alpha") || !strings.Contains(err.Error(), "did not finish the SSH handshake within") {
			t.Errorf("a Dial and exec begun during the stall: %v, want an error naming host alpha, saying it did not finish the SSH handshake", err)
		} else {
			t.Logf("a Dial begun during the stall: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("a Dial begun during the stall still waits 30 s after the gateway dropped its host")
	}

	select {
	case err := <-synced:
		if err == nil || !strings.Contains(err.Error(), "alpha") {
			t.Errorf("a sync FS Stat begun during the stall: %v, want an error naming host alpha", err)
		} else {
			t.Logf("a sync FS Stat begun during the stall: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("a sync FS Stat begun during the stall still waits 30 s after the gateway dropped its host")
	}

	// The agent's own keepalive notices too; on the path's return it
	// connects again by itself.
	agentEnd := a.waitFor(regexp.MustCompile(`msg="gateway tunnel ended.* err="([^"]*)`), 2*time.Minute)
	t.Logf("the agent noticed %v into the stall: %s", time.Since(stalled).Round(100*time.Millisecond), agentEnd[1])
	if !strings.Contains(agentEnd[1], "the gateway stopped answering") {
		t.Errorf("the agent's tunnel end for a stalled path: %q, want it to say the gateway stopped answering", agentEnd[1])
	}
	healed := time.Now()
	px.Heal()
	for len(agentUpRE.FindAllString(a.output(), -1)) < 2 {
		if time.Since(healed) > 90*time.Second {
			t.Fatalf("agent not back 90 s after the path healed:\n%s", a.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the agent was back %v after the path healed", time.Since(healed).Round(10*time.Millisecond))
	g.waitConnected("alpha", true, 30*time.Second)
	execEcho(t, ctx, g.url, g.admin, "alpha", "back")
	if !waitProcessGone(pid, 30*time.Second) {
		t.Errorf("the command across the stall (pid %d) outlived its session by 30 s", pid)
	}
}

// testClientPathHalfOpen: the path from a caller to the gateway stops
// carrying the caller's bytes (the gateway's still arrive: a half-open
// path). The caller's SSH keepalive goes unanswered, so a command it
// waits on fails naming the host and matching
// hostgate.ErrConnectionEnded instead of waiting for ever; a Reconnect
// host's next use, which dials again over the dead path, fails saying no
// answer came; and the command does not outlive its caller on the host.
func testClientPathHalfOpen(t *testing.T) {
	g, px, ctx, h, p, pid := callerThroughFault(t, "sleep 600")
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	// A long-lived program's host, which connects again on its first use
	// after a lost connection.
	rc, err := client.New(px.URL(), g.admin, &client.Options{Reconnect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.CloseIdleConnections()
	kept, err := rc.Dial(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	keptConn, err := kept.Connection(ctx)
	if err != nil {
		t.Fatal(err)
	}

	held := time.Now()
	px.HoldUp()
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	select {
	case err := <-waited:
		t.Logf("the caller's Wait ended %v into the half-open path: %v", time.Since(held).Round(100*time.Millisecond), err)
		if err == nil || !errors.Is(err, hostgate.ErrConnectionEnded) || !strings.Contains(err.Error(), "alpha") {
			t.Errorf("a command's Wait across a half-open path: %v; want an error naming host alpha, matching hostgate.ErrConnectionEnded", err)
		}
	case <-time.After(3 * time.Minute): // a guard against a hang, not a timing
		t.Fatal("a command's Wait across a half-open path still waits 3 minutes on")
	}
	if _, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err == nil || !errors.Is(err, hostgate.ErrConnectionEnded) {
		t.Errorf("exec on the connection its keepalive ended: %v, want hostgate.ErrConnectionEnded", err)
	}
	// The path then dies both ways, its sockets open (a frozen gateway
	// behind it looks the same: the kernel takes the connection, nothing
	// answers). The Reconnect host's next use dials again over it: it
	// fails, saying no answer came, rather than waiting out its caller's
	// ctx (a probe waited 4 minutes, its ctx's).
	select {
	case <-keptConn.Done:
	case <-time.After(time.Minute):
		t.Fatal("the Reconnect host's connection outlived the half-open path by a minute more")
	}
	px.Stall()
	redialed := time.Now()
	reused := make(chan error, 1)
	go func() {
		_, err := kept.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
		reused <- err
	}()
	select {
	case err := <-reused:
		t.Logf("a Reconnect host's use over the dead path failed %v in: %v", time.Since(redialed).Round(100*time.Millisecond), err)
		if err == nil || !strings.Contains(err.Error(), "alpha") || !strings.Contains(err.Error(), "no answer to the WebSocket handshake") {
			t.Errorf("a Reconnect host's use over a half-open path: %v, want an error naming host alpha, saying the handshake got no answer", err)
		}
	case <-time.After(2 * time.Minute): // a guard against a hang, not a timing
		t.Error("a Reconnect host's use over a half-open path still waits 2 minutes on")
		<-reused
	}
	if !waitProcessGone(pid, 2*time.Minute) {
		t.Errorf("the command of a caller whose path went half-open (pid %d) still runs on the host 2 minutes on", pid)
	} else {
		t.Logf("the command was gone on the host %v into the half-open path", time.Since(held).Round(100*time.Millisecond))
	}
	execEcho(t, ctx, g.url, g.admin, "alpha", "others-unaffected")
}

// testSlowLinkBulkIntact: both the agent's and the caller's paths hand
// bytes on one at a time with pauses (a slow, chatty link); a command's
// bulk output and an SFTP round trip of a file arrive whole and
// unchanged.
func testSlowLinkBulkIntact(t *testing.T) {
	g := startGateway(t, "")
	pa := newFaultProxy(t, strings.TrimPrefix(g.url, "http://"))
	pc := newFaultProxy(t, strings.TrimPrefix(g.url, "http://"))
	g.startAgentAt(pa.URL(), "alpha", "")
	ctx := testCtx(t, 5*time.Minute)
	pa.Slow(256, time.Millisecond)
	pc.Slow(256, time.Millisecond)
	start := time.Now()
	h, err := client.Dial(ctx, pc.URL(), g.admin, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// seq's output: 588,895 bytes, each line checkable.
	var want strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	res, err := h.Exec(ctx, []string{"seq", "1", "100000"}, hostgate.ExecOptions{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("bulk exec over a slow link: %+v %v", res.ExitCode, err)
	}
	if string(res.Stdout) != want.String() {
		t.Fatalf("bulk exec over a slow link: %d bytes, want %d, intact: %v", len(res.Stdout), want.Len(), strings.HasPrefix(want.String(), string(res.Stdout)))
	}
	t.Logf("dial and %d bytes of output over the slow link in %v", len(res.Stdout), time.Since(start).Round(100*time.Millisecond))

	fsys, err := h.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 256<<10)
	for i := range data {
		data[i] = byte(i*7 + i>>8)
	}
	name := t.TempDir() + "/slow"
	start = time.Now()
	if err := writeAll(ctx, fsys, name, data); err != nil {
		t.Fatalf("sftp write over a slow link: %v", err)
	}
	got, err := readAll(ctx, fsys, name)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("sftp round trip over a slow link: %d bytes of %d, equal %v, %v", len(got), len(data), bytes.Equal(got, data), err)
	}
	if onDisk, err := os.ReadFile(name); err != nil || !bytes.Equal(onDisk, data) {
		t.Fatalf("the file on the host after an sftp write over a slow link: %d bytes, equal %v, %v", len(onDisk), bytes.Equal(onDisk, data), err)
	}
	t.Logf("sftp wrote and read back %d bytes over the slow link in %v", len(data), time.Since(start).Round(100*time.Millisecond))
}

// testGatewayRestartWithEverythingOpen: the gateway restarts (SIGTERM,
// started again on its address and state dir) while a caller has a
// command, an SFTP file and a forward with a live connection open on a
// host, and a web terminal runs there. Each ends rather than hanging:
// the command and the file with an error naming the host and matching
// hostgate.ErrConnectionEnded, the forward's Err matching it too and
// its connection closed, the terminal's socket closed; the agent comes
// back by itself; and on the host the command and the terminal's shell
// are gone.
func testGatewayRestartWithEverythingOpen(t *testing.T) {
	g := startGateway(t, "")
	a := g.startAgent("alpha", "")
	ctx := testCtx(t, 4*time.Minute)
	dir := t.TempDir()
	h, err := client.Dial(ctx, g.url, g.admin, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	p, err := h.Spawn(ctx, []string{"sh", "-c", "echo $$; exec sleep 600"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	var pid int
	if _, err := fmt.Fscan(p.Stdout(), &pid); err != nil {
		t.Fatalf("command did not start: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
	fsys, err := h.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create(ctx, dir+"/open", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fw, err := h.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: echoServer(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	fc, err := net.Dial("tcp", fw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	if _, err := fc.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(fc, make([]byte, 5)); err != nil {
		t.Fatalf("forward before the restart: %v", err)
	}
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+g.admin)
	ws := dialTerminal(t, ctx, g, "alpha", hdr)
	shellPID := dir + "/shell.pid"
	// What the shell prints, not the echo of what was typed, says the
	// file is written.
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("echo $$ >"+shellPID+"; echo written$((40+2))\n")); err != nil {
		t.Fatal(err)
	}
	if err := readUntil(ctx, ws, "written42"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(shellPID)
	if err != nil {
		t.Fatal(err)
	}
	var shell int
	if _, err := fmt.Sscan(string(b), &shell); err != nil {
		t.Fatalf("terminal's shell pid %q: %v", b, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(shell, syscall.SIGKILL) })

	restarted := time.Now()
	g.restartSamePort(t)
	t.Logf("the gateway stopped and served again in %v", time.Since(restarted).Round(10*time.Millisecond))

	ended := func(what string, err error) {
		t.Helper()
		if err == nil || !errors.Is(err, hostgate.ErrConnectionEnded) || !strings.Contains(err.Error(), "alpha") {
			t.Errorf("%s across a gateway restart: %v; want an error naming host alpha, matching hostgate.ErrConnectionEnded", what, err)
		} else {
			t.Logf("%s: %v", what, err)
		}
	}
	waited := make(chan error, 1)
	go func() { waited <- p.Wait() }()
	select {
	case err := <-waited:
		ended("a command's Wait", err)
	case <-time.After(30 * time.Second): // a guard against a hang, not a timing
		t.Fatal("a command across a gateway restart still waits 30 s after the new gateway served")
	}
	_, err = f.Write([]byte("after"))
	if err == nil {
		err = f.Close()
	}
	ended("an SFTP write", err)
	select {
	case <-fw.Done():
		ended("a forward", fw.Err())
	case <-time.After(30 * time.Second):
		t.Error("a forward across a gateway restart still runs 30 s after the new gateway served")
	}
	_ = fc.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := fc.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a forwarded connection across a gateway restart: read %d, %v; want it closed", n, err)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if _, _, err := ws.Read(rctx); err != nil {
			if rctx.Err() != nil {
				t.Error("a web terminal across a gateway restart stays open 30 s after the new gateway served")
			} else {
				t.Logf("the web terminal: %v", err)
			}
			break
		}
	}

	for len(agentUpRE.FindAllString(a.output(), -1)) < 2 {
		if time.Since(restarted) > 90*time.Second {
			t.Fatalf("agent not back 90 s after the restart began:\n%s", a.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	up := regexp.MustCompile(`msg="tunnel up".* offline=(\S+) failedAttempts=(\d+)`).FindStringSubmatch(a.output())
	t.Logf("the agent was back %v after the restart began (%v)", time.Since(restarted).Round(10*time.Millisecond), up)
	execEcho(t, ctx, g.url, g.admin, "alpha", "back")
	for _, id := range []int{pid, shell} {
		if !waitProcessGone(id, 30*time.Second) {
			t.Errorf("process %d (the command, the terminal's shell %d) outlived a gateway restart by 30 s", id, shell)
		}
	}
}

// testClientPathStallsMidFlood: the path between a caller and the
// gateway stops forwarding both ways, sockets open, while a command
// floods its output to the caller. The caller's Wait fails naming the
// host and matching hostgate.ErrConnectionEnded; the gateway ends the
// relay, whose writes to the caller no longer go anywhere, though the
// socket stays open; the command is gone on the host; and the host
// serves others throughout.
func testClientPathStallsMidFlood(t *testing.T) {
	g, px, ctx, h, p, pid := callerThroughFault(t, "cat /dev/zero")
	flooded := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(io.Discard, p.Stdout())
		flooded <- n
	}()
	done := make(chan error, 1)
	go func() { done <- p.Wait() }()
	// The flood under way: a command that runs for a while.
	if _, err := h.Exec(ctx, []string{"sleep", "1"}, hostgate.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	relays := len(regexp.MustCompile(`msg="relay end"`).FindAllString(g.output(), -1))

	stalled := time.Now()
	px.Stall()
	select {
	case err := <-done:
		t.Logf("the caller's Wait ended %v into the stall, %d bytes read: %v", time.Since(stalled).Round(100*time.Millisecond), <-flooded, err)
		if err == nil || !errors.Is(err, hostgate.ErrConnectionEnded) || !strings.Contains(err.Error(), "alpha") {
			t.Errorf("a flooding command's Wait across a stalled caller path: %v; want an error naming host alpha, matching hostgate.ErrConnectionEnded", err)
		}
	case <-time.After(3 * time.Minute): // a guard against a hang, not a timing
		t.Fatal("a flooding command's Wait across a stalled caller path still waits 3 minutes on")
	}
	execEcho(t, ctx, g.url, g.admin, "alpha", "others-unaffected")
	for len(regexp.MustCompile(`msg="relay end"`).FindAllString(g.output(), -1)) <= relays+1 { // the echo's own relay ends too
		if time.Since(stalled) > 4*time.Minute {
			t.Fatalf("the gateway still relays to a caller whose path stalled 4 minutes on:\n%s", g.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the gateway ended the stalled caller's relay %v into the stall", time.Since(stalled).Round(100*time.Millisecond))
	if !waitProcessGone(pid, 3*time.Minute) {
		t.Errorf("the flooding command (pid %d) still runs 3 minutes after its caller's path stalled", pid)
	} else {
		t.Logf("the command was gone on the host %v into the stall", time.Since(stalled).Round(100*time.Millisecond))
	}
}

// callerThroughFault starts a gateway with host alpha, a fault proxy in
// front of the gateway, and a caller of alpha through the proxy running
// `exec CMD` after printing its pid, which it returns (the command is
// killed at the test's end). ctx bounds the test; h closes with it.
func callerThroughFault(t *testing.T, cmd string) (g *gw, px *faultProxy, ctx context.Context, h *hostgate.Host, p hostgate.Process, pid int) {
	t.Helper()
	g = startGateway(t, "")
	g.startAgent("alpha", "")
	px = newFaultProxy(t, strings.TrimPrefix(g.url, "http://"))
	ctx = testCtx(t, 5*time.Minute)
	h, err := client.Dial(ctx, px.URL(), g.admin, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	p, err = h.Spawn(ctx, []string{"sh", "-c", "echo $$; exec " + cmd}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	if _, err := fmt.Fscan(p.Stdout(), &pid); err != nil {
		t.Fatalf("command did not start: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return g, px, ctx, h, p, pid
}
