// Package forwardtest holds the loopback targets and the benchmark bodies
// that package forward's own tests and its OpenSSH interop tests
// (forward/internal/sshinterop) share, so both measure a forward the same
// way.
package forwardtest

import (
	"encoding/binary"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// Serve runs handle on every connection to a new loopback listener, closing
// each connection when handle returns, and returns the listener's address.
// At t's cleanup it closes the listener and every open connection and waits
// for every goroutine it started.
func Serve(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				handle(c)
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// Echo copies c back to itself and half-closes after the peer's EOF.
func Echo(c net.Conn) {
	_, _ = io.Copy(c, c)
	_ = c.(*net.TCPConn).CloseWrite()
}

// Sink reads c to EOF and answers with the byte count, big-endian int64.
func Sink(c net.Conn) {
	n, _ := io.Copy(io.Discard, c)
	_ = binary.Write(c, binary.BigEndian, n)
}

// Mode is one path to the same target: direct, or through a forward.
type Mode struct{ Name, Addr string }

// BenchThroughput pushes 1 MiB per op over one connection to each mode's
// address (a Sink behind it), one sub-benchmark per mode, and checks the
// sink's byte count.
func BenchThroughput(b *testing.B, modes []Mode) {
	for _, m := range modes {
		b.Run(m.Name, func(b *testing.B) {
			c, err := net.Dial("tcp", m.Addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, 1<<20)
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			_ = c.(*net.TCPConn).CloseWrite()
			var n int64
			if err := binary.Read(c, binary.BigEndian, &n); err != nil || n != int64(b.N)<<20 {
				b.Fatalf("sink got %d bytes, %v", n, err)
			}
		})
	}
}

// BenchRoundTrip measures a 64-byte echo round trip on one open connection
// to each mode's address (an Echo behind it), reporting p99-µs and rt/s.
func BenchRoundTrip(b *testing.B, modes []Mode) {
	for _, m := range modes {
		b.Run(m.Name, func(b *testing.B) {
			c, err := net.Dial("tcp", m.Addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			msg := make([]byte, 64)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				t0 := time.Now()
				if _, err := c.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, msg); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			elapsed := time.Since(start)
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "rt/s")
		})
	}
}
