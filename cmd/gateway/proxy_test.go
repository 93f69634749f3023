//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestProxySaysWhyWhenTheAgentGoes: when a host's agent disconnects in the
// middle of an SSH session, `gateway proxy` printed nothing and ssh showed
// only "Connection closed by UNKNOWN port 65535". The gateway now closes
// the relay with a reason, and the proxy prints it on stderr, naming the
// host, before ssh sees stdout close.
func TestProxySaysWhyWhenTheAgentGoes(t *testing.T) {
	ctx := testCtx(t)
	base, agentTok, clientTok := serveHost(t, ctx, "box")
	// The agent reaches the gateway through a TCP relay the test cuts, as
	// a killed agent or a lost network cuts its tunnel: no WebSocket
	// close, no SSH goodbye.
	cut := tcpCutter(t, strings.TrimPrefix(base, "http://"))
	defer runAgent(t, ctx, "http://"+cut.addr, agentTok)()

	inR, inW := io.Pipe()
	defer inW.Close()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	perr := make(chan error, 1)
	go func() {
		perr <- run(ctx, stdio{in: inR, out: outW, err: &stderr}, []string{"proxy", "--url", base, "--token", clientTok, "box"})
		_ = outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "SSH-2.0-") {
		t.Fatalf("the host's first line through the proxy: %q %v", line, err)
	}
	// As ssh does: stdout's end is the connection's, and ssh then exits,
	// closing the proxy's stdin.
	go func() { _, _ = io.Copy(io.Discard, outR); _ = inW.Close() }()

	cut.cut()
	err = <-perr
	if err == nil || !errors.As(err, new(reportedError)) {
		t.Fatalf("proxy returned %v, want an error it reported itself (exit 1, no second message)", err)
	}
	if got, want := stderr.String(), "gateway: connection lost: host box: its agent disconnected from the gateway\n"; got != want {
		t.Errorf("proxy stderr %q, want %q", got, want)
	}
}

// cutter relays TCP connections to a target until cut closes them all.
type cutter struct {
	addr string
	mu   sync.Mutex
	cs   []net.Conn
	wg   sync.WaitGroup
}

func tcpCutter(t *testing.T, target string) *cutter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{addr: ln.Addr().String()}
	c.wg.Go(func() {
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				_ = a.Close()
				continue
			}
			c.mu.Lock()
			c.cs = append(c.cs, a, b)
			c.mu.Unlock()
			c.wg.Go(func() { _, _ = io.Copy(a, b); _ = a.Close(); _ = b.Close() })
			c.wg.Go(func() { _, _ = io.Copy(b, a); _ = a.Close(); _ = b.Close() })
		}
	})
	t.Cleanup(func() { _ = ln.Close(); c.cut(); c.wg.Wait() })
	return c
}

// cut closes every relayed connection at once.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.cs {
		_ = x.Close()
	}
	c.cs = nil
}

// serveHost starts a gateway and makes an agent token and a client token
// for host.
func serveHost(t *testing.T, ctx context.Context, host string) (base, agentTok, clientTok string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	base = startServe(t, dir)
	var toks [2]string
	for i, role := range []string{"agent", "client"} {
		out, err := cli(t, ctx, "token", "create", "--state-dir", dir, "--role", role, "--host", host)
		if err != nil {
			t.Fatal(err)
		}
		toks[i] = lastLine(out)
	}
	return base, toks[0], toks[1]
}

// A proxy in front of a gateway that is down answers the proxy's
// handshake itself (nginx with a page of HTML): ssh's stderr says the
// gateway did not answer and what to do, not the page line by line (found
// by the audit30 audit).
func TestProxySaysTheGatewayDidNotAnswer(t *testing.T) {
	page := "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n</body>\r\n</html>\r\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, page)
	}))
	defer srv.Close()
	var stderr bytes.Buffer
	local, other := net.Pipe()
	defer other.Close()
	err := proxy(t.Context(), local, &stderr, srv.URL, "tok", "box", proxyOptions{})
	if err == nil || !strings.Contains(stderr.String(), "host box: the gateway did not answer") || !strings.Contains(stderr.String(), "start the gateway") || strings.Contains(stderr.String(), "<") {
		t.Fatalf("proxy: %v; stderr %q: want it to say the gateway did not answer and what to do, without the page", err, stderr.String())
	}
}

// A gateway that takes the connection and never answers (frozen, or the
// path to it stalled once connected) is named as one on ssh's stderr,
// where the proxy's own 30 s ctx read "context deadline exceeded" alone
// (found by the chaos44 audit).
func TestProxySaysTheGatewayNeverAnswered(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	defer func() {
		select {
		case c := <-accepted:
			_ = c.Close()
		default:
		}
	}()
	old := proxyHandshakeTimeout
	proxyHandshakeTimeout = 200 * time.Millisecond
	defer func() { proxyHandshakeTimeout = old }()
	var stderr bytes.Buffer
	local, other := net.Pipe()
	defer other.Close()
	err = proxy(t.Context(), local, &stderr, "http://"+ln.Addr().String(), "tok", "box", proxyOptions{})
	if err == nil || !strings.Contains(stderr.String(), "host box: bytestream: dial websocket: no answer to the WebSocket handshake within 200ms") {
		t.Fatalf("proxy: %v; stderr %q: want it to say the gateway never answered its handshake", err, stderr.String())
	}
}

// A gateway that is not running (or a --url with the wrong port) refuses
// the proxy's connection: ssh's stderr says no gateway answers there and
// what to check, as gateway cert's does, where it read only the dial's
// "connect: connection refused".
func TestProxySaysNoGatewayAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	var stderr bytes.Buffer
	local, other := net.Pipe()
	defer other.Close()
	err = proxy(t.Context(), local, &stderr, "http://"+addr, "tok", "box", proxyOptions{})
	if msg := stderr.String(); err == nil || !strings.Contains(msg, "no gateway answers at http://"+addr) || !strings.Contains(msg, "HOSTGATE_URL") {
		t.Fatalf("proxy: %v; stderr %q: want it to say no gateway answers at the URL and where the URL comes from", err, msg)
	}
}
