package yamux

import (
	"io"
	"net"
	"sync"
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
// gone).
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
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, peer) }()
		go func() {
			defer wg.Done()
			for {
				s, err := sess.AcceptStream()
				if err != nil {
					return
				}
				wg.Add(1)
				go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, s); _ = s.Close() }()
			}
		}()
		_ = peer.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = peer.Write(in)
		_ = peer.Close()
		ended := make(chan struct{})
		go func() {
			<-sess.CloseChan()
			_ = sess.Close()
			wg.Wait()
			close(ended)
		}()
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Fatal("session, or a goroutine serving it, still running 10 s after its peer left")
		}
	})
}
