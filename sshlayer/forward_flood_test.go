//go:build unix

package sshlayer

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/testenv"
)

// Code on the host (a sandbox's, untrusted) that connects to a caller's
// remote forward past maxForwardedConns had each connection closed, and
// each logged as a warning: a loop of connects was a line per connect in
// the agent's log, and, for a sandbox, in the gateway's, which logs what its
// agents write to stderr. The drops are logged once a spell, with their
// count.
func TestForwardedDropsLoggedOncePerSpell(t *testing.T) {
	t.Parallel()
	var logs testenv.LogBuffer
	ts := srvStartServer(t, &ServerConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := srvDialServer(t, ts)
	ln, err := c.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	// The caller's side takes every forwarded connection and holds it.
	var mu sync.Mutex
	var held []net.Conn
	accepted := make(chan struct{}, maxForwardedConns)
	go func() {
		for {
			fc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, fc)
			mu.Unlock()
			accepted <- struct{}{}
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, fc := range held {
			_ = fc.Close()
		}
	}()
	addr := ln.Addr().String()
	var local []net.Conn
	defer func() {
		for _, lc := range local {
			_ = lc.Close()
		}
	}()
	for range maxForwardedConns {
		lc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		local = append(local, lc)
		<-accepted
	}
	const extra = 200
	for i := range extra {
		lc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := lc.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("connection %d past the limit: read %d, %v; want it closed (EOF)", maxForwardedConns+i+1, n, err)
		}
		_ = lc.Close()
	}
	if n := strings.Count(logs.String(), "forwarded connection dropped"); n != 1 {
		t.Fatalf("%d connections past the limit made %d log lines, want 1:\n%s", extra, n, logs.String())
	}
}

// The same for a session's forwarded agent socket: code on the host that
// dials it past maxAgentConns in a loop is logged once a spell, not once
// a connection.
func TestAgentSocketRefusalsLoggedOncePerSpell(t *testing.T) {
	t.Parallel()
	logs, _, _, s, stdin, sock := agentCatSession(t, 0, func(c *ssh.Client) { agentEcho(t, c) })
	defer func() { _ = stdin.Close(); _ = s.Wait() }()
	dial, _ := agentDialer(t, sock)
	for i := range maxAgentConns {
		uc := dial()
		msg := fmt.Sprintf("request %d", i)
		if _, err := io.WriteString(uc, msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(uc, make([]byte, len(msg))); err != nil {
			t.Fatalf("connection %d to the agent: %v", i, err)
		}
	}
	const extra = 100
	for i := range extra {
		if n, err := dial().Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("connection %d past the limit: read %d, %v; want it closed (EOF)", maxAgentConns+i+1, n, err)
		}
	}
	if n := strings.Count(logs.String(), "agent connection refused: too many open"); n != 1 {
		t.Fatalf("%d connections past the limit made %d log lines, want 1:\n%s", extra, n, logs.String())
	}
}

// dropLog says the first drop at once, then at most one line a minute
// with how many were dropped since the last.
func TestDropLogCounts(t *testing.T) {
	var d dropLog
	t0 := time.Unix(1_700_000_000, 0)
	if n, ok := d.drop(t0); !ok || n != 1 {
		t.Fatalf("first drop: %d %v, want 1 true", n, ok)
	}
	for i := 1; i <= 5; i++ {
		if _, ok := d.drop(t0.Add(time.Duration(i) * time.Second)); ok {
			t.Fatalf("drop %d within the minute was to be logged", i+1)
		}
	}
	if n, ok := d.drop(t0.Add(dropLogEvery)); !ok || n != 6 {
		t.Fatalf("a minute on: %d %v, want 6 (five held back and this one) true", n, ok)
	}
}
