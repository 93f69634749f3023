package bicopy

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tcpPair returns the two ends of a loopback TCP connection (which supports
// CloseWrite).
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	a, b := testenv.TCPPair(t)
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// TestHalfCloseThroughCopy: a client that sends its request and half-closes
// still gets the whole answer (the copy must CloseWrite, not Close).
func TestHalfCloseThroughCopy(t *testing.T) {
	client, proxyIn := tcpPair(t)
	proxyOut, server := tcpPair(t)
	done := make(chan Stats, 1)
	go func() { st, _ := Copy(context.Background(), proxyIn, proxyOut); done <- st }()

	req := make([]byte, 1<<20)
	_, _ = rand.Read(req)
	go func() {
		_, _ = client.Write(req)
		_ = client.CloseWrite()
	}()
	got, err := io.ReadAll(server)
	if err != nil || !bytes.Equal(got, req) {
		t.Fatalf("server read %d bytes, %v", len(got), err)
	}
	if _, err := server.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	_ = server.CloseWrite()
	ans, err := io.ReadAll(client)
	if err != nil || string(ans) != "answer" {
		t.Fatalf("client read %q, %v", ans, err)
	}
	st := <-done
	if st.AToB != int64(len(req)) || st.BToA != 6 {
		t.Errorf("stats %+v", st)
	}
	client.Close()
	server.Close()
}

func TestCancelClosesBothAndReportsCause(t *testing.T) {
	a, b := tcpPair(t)
	c, d := tcpPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := Copy(ctx, b, c); errc <- err }()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Copy did not stop on cancel")
	}
	// Both outer ends see the close.
	for _, x := range []net.Conn{a, d} {
		_ = x.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := x.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("peer still open after cancel (%v)", err)
		}
		x.Close()
	}
}

// TestNoCopyBuffersPerConnection: a TCP conn copied to and from a stream
// that is not a socket (here net.Pipe; an SSH channel in a forward) uses
// the pooled buffers, not a fresh 32 KiB one each way from io.Copy behind
// TCPConn's ReadFrom and WriteTo. Not parallel: other tests' allocations
// would count.
func TestNoCopyBuffersPerConnection(t *testing.T) {
	once := func() {
		client, proxyIn := tcpPair(t)
		proxyOut, far := net.Pipe()
		done := make(chan struct{})
		go func() { defer close(done); _, _ = Copy(context.Background(), proxyIn, proxyOut) }()
		b := make([]byte, 1)
		if _, err := client.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(far, b); err != nil {
			t.Fatal(err)
		}
		if _, err := far.Write([]byte("y")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(client, b); err != nil {
			t.Fatal(err)
		}
		_ = client.Close()
		_ = far.Close()
		<-done
	}
	once() // fill the pools
	const n = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		once()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 32<<10 {
		t.Errorf("%d bytes allocated per copied connection, want under 32 KiB", per)
	}
}

// TestCopyRunsOneDirectionInCaller: Copy adds one goroutine, not two and a
// waiting caller; on a short forwarded connection each goroutine started
// and woken is a thread wake-up. Not parallel: it counts goroutines.
func TestCopyRunsOneDirectionInCaller(t *testing.T) {
	client, proxyIn := tcpPair(t)
	proxyOut, server := tcpPair(t)
	done := make(chan struct{})
	go func() { defer close(done); _, _ = Copy(context.Background(), proxyIn, proxyOut) }()
	// Wait until both directions sit in a read on their socket.
	var copying int
	deadline := time.Now().Add(10 * time.Second)
	for {
		var reading int
		reading, copying = copyGoroutines()
		if reading == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of Copy's directions reading after 10 s, want 2", reading)
		}
		runtime.Gosched()
	}
	if copying != 2 {
		t.Errorf("%d goroutines in Copy, want 2 (the caller and one more)", copying)
	}
	_ = client.Close()
	_ = server.Close()
	<-done
}

// copyGoroutines counts the goroutines in Copy and, of them, those blocked
// reading a socket.
func copyGoroutines() (reading, copying int) {
	buf := make([]byte, 1<<20)
	for g := range strings.SplitSeq(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if !strings.Contains(g, "bicopy.Copy") {
			continue
		}
		copying++
		if strings.Contains(g, "[IO wait") && strings.Contains(g, "bicopy.copyHalf") {
			reading++
		}
	}
	return reading, copying
}
