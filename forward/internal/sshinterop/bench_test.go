package sshinterop

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hostgate/hostgate/forward"
	"github.com/hostgate/hostgate/forward/internal/forwardtest"
)

// modes starts, against one sshd and one target, OpenSSH's ssh -L and
// forward.Run over our client: the same server, the same cipher
// (aes128-gcm@openssh.com), in the same run.
func modes(b *testing.B, target string) []forwardtest.Mode {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	s := startSSHD(b)
	fw, err := forward.Run(ctx, sshHost(b, s.connect(b, ctx)), forward.Spec{Kind: forward.Local, Listen: "127.0.0.1:0", Connect: target})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fw.Close() })
	return []forwardtest.Mode{
		{Name: "direct", Addr: target},
		{Name: "openssh-L", Addr: s.sshL(b, ctx, target)},
		{Name: "forward-run", Addr: fw.Addr().String()},
	}
}

// BenchmarkSSHLocalForwardThroughput pushes 1 MiB per op through each path.
func BenchmarkSSHLocalForwardThroughput(b *testing.B) {
	forwardtest.BenchThroughput(b, modes(b, forwardtest.Serve(b, forwardtest.Sink)))
}

// BenchmarkSSHLocalForwardRoundTrip measures a 64-byte echo round trip on an
// open forwarded connection, with p99.
func BenchmarkSSHLocalForwardRoundTrip(b *testing.B) {
	forwardtest.BenchRoundTrip(b, modes(b, forwardtest.Serve(b, forwardtest.Echo)))
}

// BenchmarkSSHLocalForwardConnect measures opening a forwarded connection and
// one echo round trip on it (a new direct-tcpip channel each op).
func BenchmarkSSHLocalForwardConnect(b *testing.B) {
	for _, m := range modes(b, forwardtest.Serve(b, forwardtest.Echo)) {
		b.Run(m.Name, func(b *testing.B) {
			msg := make([]byte, 16)
			for range b.N {
				c, err := net.Dial("tcp", m.Addr)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, msg); err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}

// BenchmarkSSHRoundTripInterleaved alternates a 64-byte echo through ssh -L
// and through forward.Run on two open connections, so both see the same
// machine load, and reports the ratio of mean latencies.
func BenchmarkSSHRoundTripInterleaved(b *testing.B) {
	m := modes(b, forwardtest.Serve(b, forwardtest.Echo))
	var conns [2]net.Conn
	for i, name := range []string{"openssh-L", "forward-run"} {
		for _, x := range m {
			if x.Name == name {
				c, err := net.Dial("tcp", x.Addr)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				conns[i] = c
			}
		}
	}
	msg := make([]byte, 64)
	lat := [2][]time.Duration{make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)}
	b.ResetTimer()
	for range b.N {
		for i, c := range conns {
			t0 := time.Now()
			if _, err := c.Write(msg); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, msg); err != nil {
				b.Fatal(err)
			}
			lat[i] = append(lat[i], time.Since(t0))
		}
	}
	mean := func(d []time.Duration) float64 {
		var s time.Duration
		for _, x := range d {
			s += x
		}
		return float64(s.Microseconds()) / float64(len(d))
	}
	b.ReportMetric(mean(lat[0]), "openssh-mean-µs")
	b.ReportMetric(mean(lat[1]), "run-mean-µs")
	b.ReportMetric(mean(lat[1])/mean(lat[0]), "run/openssh")
}
