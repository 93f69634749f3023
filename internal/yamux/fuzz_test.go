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
	addSessionSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) { fuzzSession(t, in, nil) })
}

// FuzzSessionInputBudget is FuzzSessionInput with the gateway's settings
// (a shared RecvBudget, CloseEndsReads), and checks the budget besides:
// once the session has ended, it holds and reserves nothing: a count that
// drifts (as a frame cut short made held drift, TestRecvBudgetHeldAfterCutFrame)
// shows in no read or write, only in what the gateway holds back for good.
func FuzzSessionInputBudget(f *testing.F) {
	addSessionSeeds(f)
	cut := fuzzFrame(typeWindowUpdate, flagSYN, 1, 0, nil)
	f.Add(append(cut, fuzzFrame(typeData, 0, 1, 100, make([]byte, 10))...)) // 90 bytes short
	f.Fuzz(func(t *testing.T, in []byte) {
		b := NewRecvBudget(1 << 20)
		fuzzSession(t, in, func(c *Config) {
			c.RecvBudget = b
			c.CloseEndsReads = true
		})
		if h, r := b.Held(), b.Reserved(); h != 0 || r != 0 {
			t.Fatalf("after the session ended the budget holds %d and reserves %d bytes, want 0 and 0", h, r)
		}
	})
}

func addSessionSeeds(f *testing.F) {
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
}

// fuzzSession runs a server session (configured by set, if not nil) on
// input in from its peer, which then leaves, and fails unless the session
// and every goroutine serving it end.
func fuzzSession(t *testing.T, in []byte, set func(*Config)) {
	peer, conn := net.Pipe()
	conf := testConfNoKeepAlive()
	conf.WriteInCaller = true
	conf.LogOutput = io.Discard
	if set != nil {
		set(conf)
	}
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
}
