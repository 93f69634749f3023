//go:build unix

package sshlayer

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// BenchmarkConnectLatency: a connection's setup (key exchange and login)
// in round trips over a link with 25 ms one way, reported as rtt/op, the
// median connection's, and rtt-least/op: to this package's server and to
// OpenSSH's sshd. On a remote host every round trip is felt; through the
// gateway each wakes every process on the path. Run it with
// -benchtime=10x.
func BenchmarkConnectLatency(b *testing.B) {
	const delay = 25 * time.Millisecond
	run := func(b *testing.B, dial func() net.Conn, auth Auth) {
		var spent []time.Duration
		for b.Loop() {
			near := testenv.DelayedLink(b, dial(), delay)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			t0 := time.Now()
			c, err := Connect(ctx, near, auth)
			spent = append(spent, time.Since(t0))
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			_ = c.Close()
		}
		testenv.ReportRoundTrips(b, spent, delay)
	}
	b.Run("server=hostgate", func(b *testing.B) {
		ts, err := StartTestServer()
		if err != nil {
			b.Fatal(err)
		}
		defer ts.Close()
		run(b, func() net.Conn {
			c, err := net.Dial("tcp", ts.Addr)
			if err != nil {
				b.Fatal(err)
			}
			return c
		}, Auth{Signer: ts.ClientSigner, HostKey: ts.HostKey})
	})
	b.Run("server=sshd", func(b *testing.B) {
		s := startSSHD(b, sshdOptions{})
		run(b, func() net.Conn { return s.dial(b) }, s.auth())
	})
}
