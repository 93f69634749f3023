package yamux

import (
	"io"
	"net"
	"testing"
	"time"
)

func fuzzFrame(t uint8, flags uint16, id, length uint32, body []byte) []byte {
	h := header(make([]byte, headerSize))
	h.encode(t, flags, id, length)
	return append(h, body...)
}

// FuzzSessionInput feeds arbitrary bytes to a server session as its
// peer's frames: whatever arrives, the session must not panic, must end
// when the peer goes, and Close must return (every goroutine it started
// gone, which the race-enabled suite and the stream goroutines check).
func FuzzSessionInput(f *testing.F) {
	var seed []byte
	seed = append(seed, fuzzFrame(typeWindowUpdate, flagSYN, 1, 0, nil)...)
	seed = append(seed, fuzzFrame(typeData, 0, 1, 5, []byte("hello"))...)
	seed = append(seed, fuzzFrame(typePing, flagSYN, 0, 7, nil)...)
	seed = append(seed, fuzzFrame(typeData, flagFIN, 1, 0, nil)...)
	seed = append(seed, fuzzFrame(typeGoAway, 0, 0, goAwayNormal, nil)...)
	f.Add(seed)
	f.Add(fuzzFrame(typeData, flagSYN|flagRST, 3, 3, []byte("abc")))
	f.Add(fuzzFrame(typeData, flagSYN, 5, 1<<31, nil))
	f.Add(fuzzFrame(typeWindowUpdate, flagSYN|flagACK|flagFIN, 2, 1<<31, nil))
	f.Add([]byte{protoVersion + 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		peer, conn := net.Pipe()
		conf := testConfNoKeepAlive()
		conf.WriteInCaller = true
		conf.LogOutput = io.Discard
		sess, err := Server(conn, conf)
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, peer) }()
		go func() {
			for {
				s, err := sess.AcceptStream()
				if err != nil {
					return
				}
				go func() { _, _ = io.Copy(io.Discard, s); _ = s.Close() }()
			}
		}()
		_, _ = peer.Write(in)
		_ = peer.Close()
		select {
		case <-sess.CloseChan():
		case <-time.After(10 * time.Second):
			t.Fatal("session still open 10 s after its peer left")
		}
		_ = sess.Close()
	})
}
