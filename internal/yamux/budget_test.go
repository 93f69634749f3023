package yamux

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRecvBudget: streams whose reader never reads hold, together, no
// more than the budget plus yamux's initial window each, however much
// their peer has to send; once read, every byte arrives, in order, and
// the budget is whole again.
func TestRecvBudget(t *testing.T) {
	const (
		window  = 4 << 20
		limit   = 6 << 20
		streams = 6
		size    = 5 << 20 // more than a window
		chunk   = 16 << 10
	)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // after the sessions' cleanups end the writers
	budget := NewRecvBudget(limit)
	cc, sc := testConfData(), testConfData()
	cc.MaxStreamWindowSize, sc.MaxStreamWindowSize = window, window
	cc.RecvBudget = budget
	client, server := testConnTLS(t)
	gw, agent := testClientServerConfig(t, client, server, cc, sc)

	var (
		written atomic.Int64
		sent    = make([]*Stream, streams)
		got     = make([]*Stream, streams)
	)
	for i := range streams {
		s, err := gw.OpenStream()
		if err != nil {
			t.Fatal(err)
		}
		got[i] = s
		a, err := agent.AcceptStream()
		if err != nil {
			t.Fatal(err)
		}
		sent[i] = a
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer a.Close()
			buf := make([]byte, chunk)
			for off := 0; off < size; off += chunk {
				for j := range buf {
					buf[j] = pattern(i, off+j)
				}
				if _, err := a.Write(buf); err != nil {
					t.Errorf("stream %d: write at %d: %v", i, off, err)
					return
				}
				written.Add(chunk)
			}
		}()
	}

	// Every sender has used up the window it was granted and all it sent
	// has arrived.
	deadline := time.Now().Add(20 * time.Second)
	for {
		blocked := 0
		for _, a := range sent {
			if atomic.LoadUint32(&a.sendWindow) == 0 {
				blocked++
			}
		}
		if blocked == streams && budget.Held() == written.Load() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("senders blocked: %d of %d; held %d, sent %d", blocked, streams, budget.Held(), written.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if held, most := budget.Held(), int64(limit+streams*initialStreamWindow); held > most {
		t.Fatalf("%d streams nobody reads hold %d bytes, over the budget's %d plus 256 KiB each (%d)", streams, held, limit, most)
	}
	if r := budget.Reserved(); r > limit {
		t.Fatalf("reserved %d, over the budget's %d", r, limit)
	}

	for i, s := range got {
		off := 0
		n, err := io.Copy(checker{i: i, off: &off}, s)
		if err != nil || n != size {
			t.Fatalf("stream %d: read %d of %d bytes: %v", i, n, size, err)
		}
		_ = s.Close()
	}
	wg.Wait()
	if h, r := budget.Held(), budget.Reserved(); h != 0 || r != 0 {
		t.Fatalf("after the streams closed: held %d, reserved %d; want 0", h, r)
	}
}

func pattern(stream, off int) byte { return byte(off*7 + off>>16 + stream) }

// checker fails a write whose bytes are not stream i's at their offset.
type checker struct {
	i   int
	off *int
}

func (c checker) Write(p []byte) (int, error) {
	for j, b := range p {
		if want := pattern(c.i, *c.off+j); b != want {
			return j, fmt.Errorf("stream %d: byte %d is %#x, want %#x", c.i, *c.off+j, b, want)
		}
	}
	*c.off += len(p)
	return len(p), nil
}
