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

// FuzzSessionInputGateway is FuzzSessionInputBudget as the gateway runs
// it: the client side of an agent's tunnel (bytestream's settings for
// gateway.DefaultTunnelMux: backlog 1, a 4 MiB window, the shared budget,
// CloseEndsReads), opening its relays' streams while the peer's frames
// arrive. The server side opens none, and a peer's stream could not
// collide with one this side opened (TestPeerStreamOfOurParityHoldsNoBudget).
func FuzzSessionInputGateway(f *testing.F) {
	addSessionSeeds(f)
	var ours []byte // the peer opens the id the gateway's first relay takes
	ours = append(ours, fuzzFrame(typeWindowUpdate, flagSYN, 1, 0, nil)...)
	ours = append(ours, fuzzFrame(typeData, 0, 1, 5, []byte("hello"))...)
	f.Add(ours)
	var acked []byte // the relays' streams answered, written to, closed
	for id := uint32(1); id <= 5; id += 2 {
		acked = append(acked, fuzzFrame(typeWindowUpdate, flagACK, id, 1<<20, nil)...)
		acked = append(acked, fuzzFrame(typeData, 0, id, 3, []byte("abc"))...)
		acked = append(acked, fuzzFrame(typeData, flagFIN, id, 0, nil)...)
	}
	f.Add(acked)
	f.Fuzz(func(t *testing.T, in []byte) {
		b := NewRecvBudget(1 << 20)
		fuzzSessionAs(t, in, true, func(c *Config) {
			c.AcceptBacklog = 1
			c.OpenBacklog = 256
			c.MaxStreamWindowSize = 4 << 20
			c.ReadsBuffered = true
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
func fuzzSession(t *testing.T, in []byte, set func(*Config)) { fuzzSessionAs(t, in, false, set) }

// fuzzSessionAs is fuzzSession with the session a client when client
// is set, which then opens three streams, as the peer's input arrives,
// and uses them as it does those it accepts.
func fuzzSessionAs(t *testing.T, in []byte, client bool, set func(*Config)) {
	peer, conn := net.Pipe()
	conf := testConfNoKeepAlive()
	conf.WriteInCaller = true
	conf.LogOutput = io.Discard
	if set != nil {
		set(conf)
	}
	start := Server
	if client {
		start = Client
	}
	sess, err := start(conn, conf)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	use := func(s *Stream) {
		defer wg.Done()
		_, _ = s.Write([]byte("SSH-2.0-x\r\n"))
		_, _ = io.Copy(io.Discard, s)
		_ = s.Close()
	}
	if client {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				s, err := sess.OpenStream()
				if err != nil {
					return
				}
				wg.Add(1)
				go use(s)
			}
		}()
	}
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
