package yamux

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// TestCloseEndsReads: with Config.CloseEndsReads, a stream's Close ends
// both directions. A Read blocked on it returns io.EOF, the stream leaves
// the session at once, what the peer sends afterwards (up to its window)
// is dropped, not buffered, and the peer's later data and FIN are no
// protocol error: the session goes on. Upstream's half-close kept the
// stream, and every byte the peer sent, until the peer's FIN or
// StreamCloseTimeout.
func TestCloseEndsReads(t *testing.T) {
	for _, wic := range []bool{false, true} {
		name := "SendLoop"
		if wic {
			name = "WriteInCaller"
		}
		t.Run(name, func(t *testing.T) {
			cconf, sconf := testConfData(), testConfData()
			cconf.WriteInCaller, sconf.WriteInCaller = wic, wic
			cconf.CloseEndsReads = true
			cconn, sconn := testConnPipe(t)
			client, server := testClientServerConfig(t, cconn, sconn, cconf, sconf)

			cs, err := client.OpenStream()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cs.Write([]byte("hi")); err != nil {
				t.Fatal(err)
			}
			ss, err := server.AcceptStream()
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 2)
			if _, err := io.ReadFull(ss, buf); err != nil {
				t.Fatal(err)
			}
			// The peer fills part of the window before the close, the
			// rest after it, and never closes its side.
			chunk := bytes.Repeat([]byte{'x'}, int(initialStreamWindow/2))
			if _, err := ss.Write(chunk); err != nil {
				t.Fatal(err)
			}
			waitBuffered(t, cs, len(chunk))
			drained := make(chan struct{})
			read := make(chan error, 1)
			go func() {
				_, err := io.ReadFull(cs, make([]byte, len(chunk)))
				close(drained)
				if err == nil {
					_, err = cs.Read(make([]byte, 1)) // blocks: nothing more yet
				}
				read <- err
			}()
			<-drained
			if err := cs.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-read:
				if err != io.EOF {
					t.Fatalf("read blocked on the stream when it closed: %v, want EOF", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("read blocked on the stream did not end when it closed")
			}
			if n := client.NumStreams(); n != 0 {
				t.Fatalf("closed stream still in the session (%d streams)", n)
			}
			if _, err := ss.Write(chunk); err != nil {
				t.Fatal(err)
			}
			if n, err := cs.Read(buf); n != 0 || err != io.EOF {
				t.Fatalf("read after close: %d, %v; want 0, EOF", n, err)
			}
			if _, err := cs.Write([]byte("x")); err != ErrStreamClosed {
				t.Fatalf("write after close: %v, want %v", err, ErrStreamClosed)
			}
			cs.recvLock.Lock()
			held := cs.recvBuf != nil && cs.recvBuf.Len() > 0
			cs.recvLock.Unlock()
			if held {
				t.Fatal("a closed stream buffers what its peer sends")
			}
			// The peer's side: it saw the FIN, and its own close is
			// fine.
			if _, err := io.ReadAll(ss); err != nil {
				t.Fatalf("peer read: %v", err)
			}
			if err := ss.Close(); err != nil {
				t.Fatal(err)
			}
			// The session goes on.
			cs2, err := client.OpenStream()
			if err != nil {
				t.Fatal(err)
			}
			defer cs2.Close()
			if _, err := cs2.Write([]byte("ok")); err != nil {
				t.Fatal(err)
			}
			ss2, err := server.AcceptStream()
			if err != nil {
				t.Fatal(err)
			}
			defer ss2.Close()
			if _, err := io.ReadFull(ss2, buf); err != nil || string(buf) != "ok" {
				t.Fatalf("a new stream after the close: %q, %v", buf, err)
			}
			if client.IsClosed() || server.IsClosed() {
				t.Fatal("session closed")
			}
		})
	}
}

// waitBuffered waits until s has n bytes buffered.
func waitBuffered(t *testing.T, s *Stream, n int) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		s.recvLock.Lock()
		got := 0
		if s.recvBuf != nil {
			got = s.recvBuf.Len()
		}
		s.recvLock.Unlock()
		if got >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("stream never buffered %d bytes", n)
}
