package forward

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/forward/internal/forwardtest"
)

// loopForwarder is a hostgate.Forwarder whose "host" is this machine: Dial and
// Listen are plain loopback TCP. Closing done plays the connection ending.
type loopForwarder struct {
	done chan struct{}
	mu   sync.Mutex
	lns  []net.Listener
}

var _ hostgate.Forwarder = (*loopForwarder)(nil)

func newLoopForwarder() *loopForwarder { return &loopForwarder{done: make(chan struct{})} }

func (f *loopForwarder) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	select {
	case <-f.done:
		return nil, errors.New("loop: connection ended")
	default:
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func (f *loopForwarder) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.lns = append(f.lns, ln)
	f.mu.Unlock()
	return ln, nil
}

func (f *loopForwarder) Done() <-chan struct{} { return f.done }

// end plays the host connection dying: remote listeners go away, Done closes.
func (f *loopForwarder) end() {
	f.mu.Lock()
	for _, ln := range f.lns {
		_ = ln.Close()
	}
	f.mu.Unlock()
	close(f.done)
}

type noTransport struct{}

func (noTransport) Spawn(context.Context, []string, hostgate.SpawnOptions) (hostgate.Process, error) {
	return nil, errors.New("no transport in this test")
}

// newHost returns a lazy Host whose connection forwards through f.
func newHost(t testing.TB, f hostgate.Forwarder) *hostgate.Host {
	h := hostgate.New(hostgate.Info{Kind: "test"}, func(context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{Transport: noTransport{}, Forward: f, Close: func() error { return nil }}, nil
	})
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// echoServer echoes every connection on loopback, half-closing after EOF.
func echoServer(t testing.TB) string { return forwardtest.Serve(t, forwardtest.Echo) }

// roundTrip writes msg, half-closes, and returns everything read back.
func roundTrip(t testing.TB, c net.Conn, msg []byte) []byte {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(msg)
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		errc <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	return got
}
