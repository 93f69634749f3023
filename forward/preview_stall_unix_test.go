//go:build unix

package forward

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// A client that asks for a large page and never reads it is let go once
// a write to it has waited writeIdleTimeout: the proxy ends the request
// and the dev server's connection. Before, the gateway held the request,
// its channel to the host and about 2 MiB of buffers for as long as the
// client kept its socket open (80 such clients: 159 MB of gateway heap,
// none ever ended), and 32 of them held a host's public shares busy for
// everyone.
func TestPreviewClientThatNeverReadsIsLetGo(t *testing.T) {
	ctx := testCtx(t)
	// Restored by a cleanup registered before the env's: it runs after the
	// servers have closed and their handlers returned (a defer raced them).
	old := writeIdleTimeout
	t.Cleanup(func() { writeIdleTimeout = old })
	writeIdleTimeout = 200 * time.Millisecond
	ended := make(chan error, 1)
	e := newPreviewEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 32<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				ended <- err
				return
			}
		}
	}), nil)
	// A small receive window, so the stall shows after little data.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.DialContext(ctx, "tcp", e.gw.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	path := fmt.Sprintf("/preview/dev/%d/big", e.devPort)
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, e.gw.Listener.Addr()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("a preview client that reads nothing still holds its request to the dev server after 30 s")
	}
	// The proxy closed the client's connection: what is left to read ends.
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Fatalf("the stalled client's connection was not closed: %v", err)
	}
}
