package bytestream

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// A read deadline that passes between reads fails the next read without
// closing the conn (as NetConn's does); cleared, the conn reads again.
func TestMsgConnDeadlineBetweenReads(t *testing.T) {
	a, b := wsPair(t)
	mc := a.(*wsConn).Conn.(*msgConn)
	if err := a.SetReadDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	// The timer fires on its own goroutine; wait for it (bounded) so the
	// read below does not race it.
	for end := time.Now().Add(10 * time.Second); !mc.rd.expired.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the deadline timer did not fire")
		}
	}
	if _, err := a.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	if err := a.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write([]byte("still open")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(a, buf); err != nil || string(buf) != "still open" {
		t.Fatalf("read after clearing the deadline: %q, %v", buf, err)
	}
}

// A write deadline that passes while a write is blocked (the peer reads
// nothing) ends the write with os.ErrDeadlineExceeded, by closing the conn.
func TestMsgConnDeadlineDuringWrite(t *testing.T) {
	url, ch := wsServer(t, nil)
	ws, _, err := websocket.Dial(testCtx(t), url, nil) // raw: no write-behind
	if err != nil {
		t.Fatal(err)
	}
	peer := <-ch // never read
	t.Cleanup(func() { _ = peer.Close() })
	a := newWSConn(ws, 0, nil, false)
	t.Cleanup(func() { _ = a.ws.CloseNow() })
	if err := a.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, MaxMessageSize)
	for i := 0; ; i++ {
		if i == 100_000 {
			t.Fatal("6 GiB written to a peer that reads nothing")
		}
		if _, err = a.Write(chunk); err != nil {
			break
		}
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
}

// An accepted conn reports its TCP addresses; a dialed one reports no
// remote TCP address (its peer may be a proxy) but names the URL it
// dialed, without the query: an agent logged remote=websocket/unknown-addr
// for every session that came through its gateway tunnel. Its local end
// is its TCP conn's, the address the accepted end sees (an agent's
// commands said UNKNOWN 65535 for it in SSH_CONNECTION); with a caller's
// HTTP client, whose conn it does not see, it is unknown.
func TestMsgConnAddrs(t *testing.T) {
	url, ch := wsServer(t, nil)
	a, err := WebSocket(testCtx(t), url+"/v1/agent/connect?secret=s3cret", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := acceptedConn(t, ch)
	t.Cleanup(func() { closeBoth(a, b) })
	if la, ok := a.LocalAddr().(*net.TCPAddr); !ok || la.String() != b.RemoteAddr().String() {
		t.Errorf("dialed LocalAddr %v (%T), want the accepted end's RemoteAddr %v", a.LocalAddr(), a.LocalAddr(), b.RemoteAddr())
	}
	own, err := WebSocket(testCtx(t), url, &WebSocketOptions{HTTPClient: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	ob := acceptedConn(t, ch)
	t.Cleanup(func() { closeBoth(own, ob) })
	if got := own.LocalAddr().String(); got != "websocket/unknown-addr" {
		t.Errorf("LocalAddr of a conn a caller's HTTP client dialed: %q, want websocket/unknown-addr", got)
	}
	want := strings.Replace(url, "http://", "ws://", 1) + "/v1/agent/connect"
	if ra := a.RemoteAddr(); ra.Network() != "websocket" || ra.String() != want {
		t.Errorf("dialed RemoteAddr %s %q, want websocket %q", ra.Network(), ra.String(), want)
	}
	ra, ok := b.RemoteAddr().(*net.TCPAddr)
	if !ok || !ra.IP.IsLoopback() {
		t.Errorf("accepted RemoteAddr %v (%T), want the loopback TCP peer", b.RemoteAddr(), b.RemoteAddr())
	}
}

// A text message is refused: the stream is binary messages only.
func TestMsgConnRefusesText(t *testing.T) {
	url, ch := wsServer(t, nil)
	ws, _, err := websocket.Dial(testCtx(t), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	srv := <-ch
	t.Cleanup(func() { _ = srv.Close() })
	if err := ws.Write(testCtx(t), websocket.MessageText, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	go func() { _, _, _ = ws.Read(testCtx(t)) }() // answers the close
	_, err = srv.Read(make([]byte, 16))
	if err == nil || !strings.Contains(err.Error(), "want binary") {
		t.Fatalf("read of a text message: %v, want a refusal", err)
	}
}

// Close with a Read blocked on the conn and a peer that never answers the
// close frame returns without error, well before coder/websocket's 5 s
// handshake wait (NetConn's Close did not wait at all).
func TestMsgConnCloseWithSilentPeer(t *testing.T) {
	url, ch := wsServer(t, nil)
	ws, _, err := websocket.Dial(testCtx(t), url, nil) // never reads: never answers
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	srv := <-ch
	readErr := make(chan error, 1)
	go func() {
		_, err := srv.Read(make([]byte, 1))
		readErr <- err
	}()
	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// It cuts the wait at closeReplyWait (250 ms); the handshake's is 5 s.
	d := time.Since(start)
	t.Logf("Close took %v with a silent peer", d)
	if d > 4*time.Second {
		t.Fatalf("Close took %v with a silent peer: it waited for coder/websocket's handshake timeout", d)
	}
	if err := <-readErr; err == nil {
		t.Fatal("the blocked Read returned no error after Close")
	}
}

// With a live peer, Close completes the handshake: the peer reads a
// normal closure.
func TestMsgConnCloseHandshake(t *testing.T) {
	a, b := wsPair(t)
	peerErr := make(chan error, 1)
	go func() {
		_, err := a.Read(make([]byte, 1))
		peerErr <- err
	}()
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-peerErr; err != io.EOF {
		t.Fatalf("peer read %v, want io.EOF (a normal closure)", err)
	}
}

// A peer that dies mid-frame: Read returns the error and none of the
// frame's bytes. coder/websocket hands back the bytes it read with the
// error, still masked, which yamux took for frames.
func TestMsgConnPartialFrameNotDelivered(t *testing.T) {
	got := make(chan []byte, 1)
	errc := make(chan error, 1)      // the read's end, after got
	acceptErr := make(chan error, 1) // the upgrade failed
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := Accept(w, r, nil)
		if err != nil {
			acceptErr <- err
			return
		}
		defer conn.Close()
		var all []byte
		buf := make([]byte, 64<<10)
		for {
			n, err := conn.Read(buf)
			all = append(all, buf[:n]...)
			if err != nil {
				got <- all
				errc <- err
				return
			}
		}
	}))
	defer srv.Close()
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	if res, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v", err)
	}
	// A whole masked frame of 10 bytes, then one announcing 100 of which
	// 40 arrive before the peer dies.
	key := []byte{1, 2, 3, 4}
	frame := func(announced int, payload []byte) []byte {
		f := append([]byte{0x82, 0x80 | byte(announced)}, key...)
		for i, b := range payload {
			f = append(f, b^key[i%4])
		}
		return f
	}
	_, _ = c.Write(append(frame(10, []byte("whole-ok!!")), frame(100, []byte(strings.Repeat("A", 40)))...))
	_ = c.Close()
	select {
	case all := <-got:
		if err := <-errc; err == nil || errors.Is(err, io.EOF) {
			t.Errorf("a frame cut short ended with %v, want an error that is not EOF", err)
		}
		if string(all) != "whole-ok!!" {
			t.Errorf("read %q, want the whole frame's bytes and nothing of the cut one", all)
		}
	case err := <-acceptErr:
		// Not errc: the read's end is sent there too, right after got,
		// and a select with both ready picks either.
		t.Fatal(err)
	case <-time.After(30 * time.Second):
		t.Fatal("no end of the read")
	}
}

// A deadline's timer may have started firing when SetReadDeadline stops
// it (AfterFunc's Stop cannot take a started function back): that late
// firing must not mark the cleared deadline expired, nor close the conn
// under a Read whose deadline was moved. The firing is called here as
// the timer would call it.
func TestMsgConnLateDeadlineFiring(t *testing.T) {
	a, b := wsPair(t)
	mc := a.(*wsConn).Conn.(*msgConn)

	if err := a.SetReadDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := a.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	mc.rd.fire() // the first deadline's firing, late
	if mc.rd.expired.Load() {
		t.Fatal("a late firing marked a cleared read deadline expired")
	}

	if err := a.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		buf := make([]byte, 5)
		_, err := io.ReadFull(a, buf)
		if err == nil && string(buf) != "alive" {
			err = errors.New("read " + string(buf))
		}
		got <- err
	}()
	// Until the Read holds the lock, the firing would only mark expiry.
	for end := time.Now().Add(10 * time.Second); mc.readMu.TryLock(); time.Sleep(time.Millisecond) {
		mc.readMu.Unlock()
		if time.Now().After(end) {
			t.Fatal("the read did not start")
		}
	}
	mc.rd.fire() // a late firing of a deadline since moved an hour on
	if _, err := b.Write([]byte("alive")); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("read under a moved deadline after a late firing: %v", err)
	}
}
