package hostgate_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
)

// A process out of descriptors for a moment (EMFILE) must not end a
// local forward: it ended for good, where ssh -L and forward.Run wait it
// out. The connection that met it waits in the backlog and is served
// once descriptors are back.
func TestForwardLocalOutlivesEMFILE(t *testing.T) {
	srv := startUpper(t)
	h := forwardHost(t, &loopbackForwarder{})
	fw, err := h.Forward(context.Background(), hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: srv.ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	restore := testenv.ExhaustFDs(t)
	c, err := net.Dial("tcp", fw.Addr().String()) // the last descriptor: the forward's accept meets EMFILE
	if err != nil {
		restore()
		t.Fatalf("dial of the forward: %v (its Err: %v)", err, fw.Err())
	}
	defer c.Close()
	select {
	case <-fw.Done():
	case <-time.After(200 * time.Millisecond): // the accept wakes at once; a wait only widens the window
	}
	restore()
	select {
	case <-fw.Done():
		t.Fatalf("the forward ended on a moment without descriptors: %v", fw.Err())
	default:
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "hello\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	if b, err := io.ReadAll(c); err != nil || string(b) != "HELLO\nbye\n" {
		t.Errorf("the connection that met EMFILE read %q, %v; want it served once descriptors were back", b, err)
	}
	if got := talk(t, fw.Addr().String()); got != "HELLO\nWORLD\nbye\n" {
		t.Errorf("a later connection: %q", got)
	}
}
