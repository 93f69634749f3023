//go:build unix

package hostgate_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
)

// TestForwardCountsFailedConnectsOverSSH is TestForwardCountsFailedConnects
// over SSH to our server, where a refused connect shows after the client's
// request went out as early data, as the error of the forward's first Read.
func TestForwardCountsFailedConnectsOverSSH(t *testing.T) {
	checkFailedConnects(t, sshHost(t))
}

// TestForwardFailureKnownWhenClientSeesIt: by the time a forwarded
// connection's client sees it closed, LastFailure says why and Failed
// counts it, without closing the forward. A program asks right after its
// request failed ("is my dev server up?"); over SSH the refusal comes
// after the request went out as early data, and the forward closed the
// client's connection before it recorded why: the first failed GET of an
// agent's program through gateway dev found LastFailure nil.
func TestForwardFailureKnownWhenClientSeesIt(t *testing.T) {
	dead := testenv.RefusedAddr(t)
	fw, err := sshHost(t).Forward(context.Background(), hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: dead})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	for i := range 100 {
		c, err := net.Dial("tcp", fw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(c); len(b) != 0 || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a connection whose connect failed: read %q, %v; want it closed at once", b, err)
		}
		c.Close()
		if st, err := fw.Stats(), fw.LastFailure(); st.Failed != int64(i+1) || !errors.Is(err, hostgate.ErrConnectFailed) {
			t.Fatalf("connection %d closed on its client: Failed %d, LastFailure %v; want %d and ErrConnectFailed", i+1, st.Failed, err, i+1)
		}
	}
}
