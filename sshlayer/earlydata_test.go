package sshlayer

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
)

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// TestDialEarly: against our own server DialEarly returns before the host
// has connected, the bytes written before and after the answer arrive
// intact and in order (the first write larger than the early allowance, so
// that it spans both), and a refused connect is the error of the first
// Read, after which the connection serves new channels as before.
func TestDialEarly(t *testing.T) {
	t.Parallel()
	ts := srvStartServer(t, nil)
	c := connectEmbedded(t, ts)
	if !c.earlyData {
		t.Fatalf("our server's version %q did not announce early data", serverVersion)
	}
	echo := srvStartEcho(t)
	ctx := testCtx(t)

	for _, size := range []int{1, 100, 32 << 10, 32<<10 + 1, 1 << 20} {
		conn, err := c.DialEarly(ctx, "tcp", echo)
		if err != nil {
			t.Fatal(err)
		}
		if err := srvEchoCheck(conn, size); err != nil {
			t.Errorf("%d bytes: %v", size, err)
		}
		_ = conn.Close()
	}

	// A refused connect: DialEarly cannot know yet; the write goes early
	// (or fails, if the refusal came first), and the read says why.
	conn, err := c.DialEarly(ctx, "tcp", closedPort(t))
	if err != nil {
		t.Fatalf("early dial of a closed port failed at once (%v): it did not go early", err)
	}
	_, _ = conn.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	var oe *ssh.OpenChannelError
	if _, err := io.ReadAll(conn); !errors.As(err, &oe) || oe.Reason != ssh.ConnectionFailed {
		t.Fatalf("read after a refused early connect: %v, want an open failure (connect failed)", err)
	}
	if _, err := conn.Write([]byte("more")); !errors.As(err, &oe) {
		t.Fatalf("write after a refused early connect: %v, want the open failure", err)
	}
	_ = conn.Close()

	// Closed before the answer: nothing hangs, and the connection is fine.
	for range 20 {
		conn, err := c.DialEarly(ctx, "tcp", echo)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.Close()
	}
	conn, err = c.DialEarly(ctx, "tcp", echo)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := srvEchoCheck(conn, 4096); err != nil {
		t.Fatalf("after refused and abandoned early channels: %v", err)
	}
}

// TestDialEarlyConcurrent opens many short early channels at once, so
// that channel ids are reused while early data for others is in flight:
// each must get its own bytes back.
func TestDialEarlyConcurrent(t *testing.T) {
	t.Parallel()
	ts := srvStartServer(t, nil)
	c := connectEmbedded(t, ts)
	echo := srvStartEcho(t)
	ctx := testCtx(t)
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				conn, err := c.DialEarly(ctx, "tcp", echo)
				if err != nil {
					errs <- err
					return
				}
				err = srvEchoCheck(conn, 1+(w*each+i)*997%(48<<10))
				_ = conn.Close()
				if err != nil {
					errs <- fmt.Errorf("worker %d, channel %d: %w", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestDialEarlyRefusedChannel: a server that refuses direct-tcpip drops the
// early data with the channel; the client sees why at its read.
func TestDialEarlyRefusedChannel(t *testing.T) {
	t.Parallel()
	ts := srvStartServer(t, &ServerConfig{MaxSessions: 1})
	c := connectEmbedded(t, ts)
	echo := srvStartEcho(t)
	ctx := testCtx(t)
	first, err := c.DialEarly(ctx, "tcp", echo)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := writeRead(first, "one"); err != nil {
		t.Fatal(err)
	}
	// The one channel allowed is taken: the second open is refused.
	second, err := c.DialEarly(ctx, "tcp", echo)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	_, _ = second.Write([]byte("dropped"))
	var oe *ssh.OpenChannelError
	if _, err := io.ReadAll(second); !errors.As(err, &oe) {
		t.Fatalf("read of a refused early channel: %v, want an open failure", err)
	}
	if err := writeRead(first, "two"); err != nil {
		t.Fatalf("the open channel after a refused one: %v", err)
	}
}

// writeRead writes msg to an echoing conn and reads it back.
func writeRead(c net.Conn, msg string) error {
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if string(got) != msg {
		return fmt.Errorf("echo %q, want %q", got, msg)
	}
	return nil
}

func TestTakesEarlyData(t *testing.T) {
	for v, want := range map[string]bool{
		serverVersion:                                true,
		"SSH-2.0-hostgate":                           false, // before early data
		"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3":     false,
		"SSH-2.0-hostgate x early-data@hostgate y":   true,
		"SSH-2.0-early-data@hostgate":                false, // a software version, not a comment
		"SSH-2.0-hostgate early-data@hostgate.other": false,
		"": false,
	} {
		if got := takesEarlyData([]byte(v)); got != want {
			t.Errorf("takesEarlyData(%q) = %v, want %v", v, got, want)
		}
	}
}
