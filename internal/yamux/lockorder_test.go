package yamux

import (
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
)

// waitBlockedIn waits until a goroutine's stack shows it in fn (it is
// then blocked there, or about to be).
func waitBlockedIn(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if strings.Contains(string(buf[:n]), fn) {
			return
		}
		runtime.Gosched()
	}
}

// TestConcurrentReadsAfterFIN: two Reads at once on a stream the peer has
// closed (net.Conn allows it). One, past its bytes, sends a window update;
// the other, at its start, holds the state lock and takes the receive lock
// to see whether anything is left. The update must not hold the receive
// lock while it takes the state lock (sendFlags), or both wait for ever,
// and with them the receive loop (processFlags takes the state lock): the
// whole session.
func TestConcurrentReadsAfterFIN(t *testing.T) {
	peer, conn := net.Pipe()
	go func() { _, _ = io.Copy(io.Discard, peer) }()
	conf := testConfNoKeepAlive()
	conf.LogOutput = io.Discard
	conf.WriteInCaller = true
	sess, err := Server(conn, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sess.Close() }()
	defer func() { _ = peer.Close() }()
	if _, err := peer.Write(fuzzFrame(typeWindowUpdate, flagSYN, 1, 0, nil)); err != nil {
		t.Fatal(err)
	}
	st, err := sess.AcceptStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Write(fuzzFrame(typeData, flagFIN, 1, 4, []byte("data"))); err != nil {
		t.Fatal(err)
	}
	for closed := false; !closed; runtime.Gosched() {
		st.stateLock.Lock()
		closed = st.state == streamRemoteClose
		st.stateLock.Unlock()
	}

	st.stateLock.Lock() // the first Read, at its start
	done := make(chan error, 1)
	go func() { done <- st.sendWindowUpdate(nil) }() // the second, past its bytes
	waitBlockedIn(t, "yamux.(*Stream).sendFlags")
	free := st.recvLock.TryLock()
	if free {
		st.recvLock.Unlock()
	}
	st.stateLock.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !free {
		t.Fatal("a window update holds the stream's receive lock while it takes the state lock, which a Read at its start holds while it takes the receive lock: two Reads at once on a stream the peer closed deadlock, and the session's receive loop with them")
	}
	buf := make([]byte, 8)
	if n, err := st.Read(buf); n != 4 || err != nil {
		t.Fatalf("Read = %d, %v; want the 4 bytes sent", n, err)
	}
}
