//go:build unix

package sshlayer

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestForwardBadPortNamed: a TCP address whose port is no number from 0
// to 65535 is refused before it is sent, saying so: Listen sent 99999
// and -1 on (x/crypto's parse took them), and the host's refusal read
// as its policy's ("tcpip-forward request denied by peer"); Dial and
// Listen said a service name or an empty port in strconv's words.
func TestForwardBadPortNamed(t *testing.T) {
	c := connectEmbedded(t, srvStartServer(t, nil))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, addr := range []string{"127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:http", "127.0.0.1:", "127.0.0.1:65536"} {
		ln, err := c.Listen(ctx, "tcp", addr)
		if err == nil {
			_ = ln.Close()
		}
		conn, derr := c.Dial(ctx, "tcp", addr)
		if derr == nil {
			_ = conn.Close()
		}
		for op, err := range map[string]error{"Listen": err, "Dial": derr} {
			if err == nil || !strings.Contains(err.Error(), "0 to 65535") {
				t.Errorf("%s %s: %v; want the port named as no number from 0 to 65535", op, addr, err)
			}
		}
	}
	ln, err := c.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Listen on port 0: %v", err)
	}
	_ = ln.Close()
}
