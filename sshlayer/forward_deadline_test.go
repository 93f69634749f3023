//go:build unix

package sshlayer

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/nettest"
)

// serveForwarded serves srv, until the test ends, on a listener that an
// embedded server opened for its client (Client.Listen): every connection
// it accepts is a forwarded-tcpip channel.
func serveForwarded(t *testing.T, srv *http.Server) net.Listener {
	t.Helper()
	_, c := startEmbedded(t)
	ln, err := c.Listen(testCtx(t), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln
}

// TestListenServesHTTPKeepAlive: an http.Server on a forwarded listener,
// with ReadTimeout and WriteTimeout set, answers two requests on one
// keep-alive connection, hijacks a connection for an upgrade (a
// WebSocket's), and shuts down gracefully. Forwarded connections had no
// deadlines (x/crypto's "tcpChan: deadline not supported"), and net/http
// ends every response, and starts every hijack, by setting a read deadline
// in the past and waiting for its background read to return: the server
// waited there until the client sent more. So an upgrade never answered
// (its client waits for the answer), and Shutdown never saw the
// connection idle.
func TestListenServesHTTPKeepAlive(t *testing.T) {
	ctx := testCtx(t)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/upgrade" {
				_, _ = io.WriteString(w, "hello "+r.URL.Path)
				return
			}
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			defer func() { _ = conn.Close() }()
			_, _ = io.WriteString(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
			_ = brw.Flush()
			_, _ = io.Copy(conn, brw)
		}),
		ReadTimeout:  time.Minute,
		WriteTimeout: time.Minute,
	}
	ln := serveForwarded(t, srv)

	t.Run("upgrade", func(t *testing.T) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
		defer stop()
		if _, err := io.WriteString(conn, "GET /upgrade HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("upgrade: %v, want its answer", err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade answered %s", resp.Status)
		}
		if _, err := io.WriteString(conn, "ping"); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4)
		if _, err := io.ReadFull(br, got); err != nil || string(got) != "ping" {
			t.Fatalf("upgraded connection echoed %q, %v; want ping", got, err)
		}
	})

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for i, path := range []string{"/one", "/two"} {
		var reused bool
		rctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		})
		req, err := http.NewRequestWithContext(rctx, "GET", "http://"+ln.Addr().String()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %s: %v", path, err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || string(body) != "hello "+path {
			t.Fatalf("request %s: %q, %v; want %q", path, body, err, "hello "+path)
		}
		if i > 0 && !reused {
			t.Errorf("request %s went on a new connection, want the first one kept alive", path)
		}
	}
	// The client keeps its connection open, idle.
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a keep-alive connection idle: %v, want the connection seen idle and closed", err)
	}
}

// TestListenHTTPReadTimeout: an http.Server's ReadTimeout on a forwarded
// listener ends a connection whose request does not come whole: the
// server closes it. Without deadlines it waited for the rest for as long as
// the client kept the connection.
func TestListenHTTPReadTimeout(t *testing.T) {
	ctx := testCtx(t)
	ln := serveForwarded(t, &http.Server{
		Handler:     http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		ReadTimeout: 50 * time.Millisecond,
	})
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the server kept a connection whose request never came whole past its ReadTimeout")
	}
	if err == nil {
		// net/http may answer 408 before it closes.
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("server answered %s to half a request, want it closed", resp.Status)
		}
		_, err = io.ReadAll(conn)
	}
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reading after the ReadTimeout: %v, want the connection closed", err)
	}
}

// TestUnixForwardDeadlines: Unix-socket forwards (direct-streamlocal and
// forwarded-streamlocal channels) have the deadlines TCP forwards have.
func TestUnixForwardDeadlines(t *testing.T) {
	_, c := startEmbedded(t)
	ctx := testCtx(t)
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := c.Listen(ctx, "unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	dialed, acc, err := forwardedPair(ctx, c, ln, "unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dialed.Close(); _ = acc.Close() }()
	for _, conn := range []net.Conn{dialed, acc} {
		if err := conn.SetDeadline(time.Now().Add(-time.Second)); err != nil {
			t.Fatalf("SetDeadline: %v", err)
		}
		var ne net.Error
		if _, err := conn.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("Read past the deadline: %v, want os.ErrDeadlineExceeded", err)
		}
		if n, err := conn.Write([]byte("x")); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("Write past the deadline: %d, %v; want 0, os.ErrDeadlineExceeded", n, err)
		}
		if err := conn.SetDeadline(time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := io.WriteString(dialed, "hi"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 2)
	if _, err := io.ReadFull(acc, got); err != nil || string(got) != "hi" {
		t.Fatalf("after the deadlines were cleared: %q, %v", got, err)
	}
}

// TestForwardedConnConformance runs x/net's net.Conn conformance test on a
// pair of forwarded connections: one dialed through the host (direct-tcpip)
// to a listener the client asked the host for, and the one that listener
// accepts (forwarded-tcpip). It checks deadlines (past, present, future,
// moved on), concurrent Reads, Writes and Close, and that data arrives
// whole.
func TestForwardedConnConformance(t *testing.T) {
	_, c := startEmbedded(t)
	ctx := testCtx(t)
	ln, err := c.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		c1, c2, err = forwardedPair(ctx, c, ln, "tcp", ln.Addr().String())
		if err != nil {
			return nil, nil, nil, err
		}
		return c1, c2, func() { _ = c1.Close(); _ = c2.Close() }, nil
	})
}

// forwardedPair dials addr through c's host (a direct-tcpip or
// direct-streamlocal channel) to ln, a listener the host opened for c, and
// returns the dialed conn and the one ln accepts for it (a forwarded-tcpip
// or forwarded-streamlocal channel).
func forwardedPair(ctx context.Context, c *Client, ln net.Listener, network, addr string) (dialed, accepted net.Conn, err error) {
	type result struct {
		conn net.Conn
		err  error
	}
	got := make(chan result, 1)
	go func() {
		conn, err := ln.Accept()
		got <- result{conn, err}
	}()
	if dialed, err = c.Dial(ctx, network, addr); err != nil {
		return nil, nil, err
	}
	r := <-got
	if r.err != nil {
		_ = dialed.Close()
		return nil, nil, r.err
	}
	return dialed, r.conn, nil
}
