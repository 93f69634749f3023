//go:build unix

package sshlayer

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// hangUpConn closes as a client that leaves cleanly does: FIN, then the
// server's close, as gateway proxy's probe of a direct address does.
type hangUpConn struct{ *net.TCPConn }

func (c hangUpConn) Close() error {
	_ = c.CloseWrite()
	_, _ = io.Copy(io.Discard, c.TCPConn)
	return c.TCPConn.Close()
}

// TestHandshakeHangUpLogsAtDebug: a client that stops after the key
// exchange and hangs up before authenticating (gateway proxy checks a
// direct address shows the host's key so, once per ssh run) is logged at
// debug level, not as a failed handshake at each ssh run; a client that
// fails to authenticate still is.
func TestHandshakeHangUpLogsAtDebug(t *testing.T) {
	var logs testenv.LogBuffer
	ts := srvStartServer(t, &ServerConfig{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	raw, err := net.DialTimeout("tcp", ts.Addr, srvTestWait)
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.SetDeadline(time.Now().Add(srvTestWait))
	stop := errors.New("seen")
	_, _, _, err = ssh.NewClientConn(hangUpConn{raw.(*net.TCPConn)}, ts.Addr, &ssh.ClientConfig{
		HostKeyCallback: func(string, net.Addr, ssh.PublicKey) error { return stop },
	})
	if !errors.Is(err, stop) {
		t.Fatalf("probe: %v", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srvDialWith(ts.Addr, ts.HostPublicKey, ssh.PublicKeys(other)); err == nil {
		t.Fatal("a key the server does not know authenticated")
	}
	for i := 0; !strings.Contains(logs.String(), "before authentication") || !strings.Contains(logs.String(), "ssh handshake failed"); i++ {
		if i == 1000 {
			t.Fatalf("not both handshakes logged after 10 s:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for line := range strings.Lines(logs.String()) {
		switch {
		case strings.Contains(line, "before authentication") && !strings.Contains(line, "level=DEBUG"):
			t.Errorf("the hang-up logged above debug: %s", line)
		case strings.Contains(line, "ssh handshake failed") && !strings.Contains(line, "level=INFO"):
			t.Errorf("the failed authentication logged below info: %s", line)
		}
	}
	if n := strings.Count(logs.String(), "ssh handshake failed"); n != 1 {
		t.Errorf("%d failed handshakes logged, want 1 (the authentication):\n%s", n, logs.String())
	}
}
