package bytestream

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
)

func FuzzWebSocketURL(f *testing.F) {
	for _, s := range []string{"http://gw:8080/v1/agents/connect", "wss://gw/x?y#z", "ws://[::1]:1/", "HTTPS://a", "ftp://x", "http:///", "http://u:p@h/", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := websocketURL(raw)
		if err != nil {
			return
		}
		u, err := url.Parse(got)
		if err != nil {
			t.Fatalf("websocketURL(%q) = %q, which does not parse: %v", raw, got, err)
		}
		if u.Scheme != "ws" && u.Scheme != "wss" || u.Host == "" || u.User != nil || u.Fragment != "" {
			t.Fatalf("websocketURL(%q) = %q: bad scheme, host, user or fragment", raw, got)
		}
		// Mapping is idempotent.
		if again, err := websocketURL(got); err != nil || again != got {
			t.Fatalf("websocketURL(%q) = %q, %v; want %q", got, again, err, got)
		}
	})
}

// fuzzConn serves reads from a fixed input and records writes.
type fuzzConn struct {
	net.Conn // nil; only the methods below are used
	r        io.Reader
	mu       sync.Mutex
	w        bytes.Buffer
}

func (c *fuzzConn) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *fuzzConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.w.Write(p)
}
func (c *fuzzConn) Close() error { return nil }

func frame(typ uint8, flags uint16, id uint32, body []byte, length uint32) []byte {
	h := make([]byte, hdrSize)
	h[1] = typ
	binary.BigEndian.PutUint16(h[2:4], flags)
	binary.BigEndian.PutUint32(h[4:8], id)
	binary.BigEndian.PutUint32(h[8:12], length)
	return append(h, body...)
}

// FuzzMuxConnRead feeds arbitrary peer bytes through the inbound frame
// parser with MaxStreams 2: no panic, never more than 2 peer streams
// admitted, nothing delivered that was not received, refusals are
// well-formed RST frames.
func FuzzMuxConnRead(f *testing.F) {
	var seed []byte
	for id := uint32(1); id <= 5; id += 2 {
		seed = append(seed, frame(typeWindowUpdate, flagSYN, id, nil, 0)...)
		seed = append(seed, frame(typeData, 0, id, []byte("hello"), 5)...)
	}
	seed = append(seed, frame(typeData, flagFIN, 1, nil, 0)...)
	seed = append(seed, frame(2, flagSYN, 0, nil, 7)...)
	f.Add(seed)
	f.Add(frame(typeData, flagSYN|flagRST, 9, []byte("abc"), 1<<31))
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		fc := &fuzzConn{r: bytes.NewReader(in)}
		c := newMuxConn(fc, 2, 0)
		var out bytes.Buffer
		buf := make([]byte, 100)
		for {
			n, err := c.Read(buf)
			out.Write(buf[:n])
			if err != nil {
				break
			}
		}
		c.Close()
		if c.streams.open() > 2 {
			t.Fatalf("%d peer streams admitted, limit 2", c.streams.open())
		}
		if out.Len() > len(in) {
			t.Fatalf("delivered %d bytes from %d", out.Len(), len(in))
		}
		w := fc.w.Bytes()
		if len(w)%hdrSize != 0 {
			t.Fatalf("wrote %d bytes, not whole RST frames", len(w))
		}
		for ; len(w) > 0; w = w[hdrSize:] {
			h := frameHeader(w[:hdrSize])
			if h.typ() != typeWindowUpdate || h.flags() != flagRST || h.length() != 0 {
				t.Fatalf("wrote frame %x, want a RST", w[:hdrSize])
			}
		}
	})
}

// FuzzFrameScanner: scanning a byte stream in arbitrary pieces finds the
// same frames as scanning it whole.
func FuzzFrameScanner(f *testing.F) {
	f.Add(append(frame(typeData, flagSYN, 1, []byte("abcdef"), 6), frame(typeWindowUpdate, flagFIN, 1, nil, 0)...), []byte{1, 5, 13})
	f.Add([]byte(strings.Repeat("\x00", 40)), []byte{0, 0, 40})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		var whole frameScanner
		tw := newStreamTable(1 << 30)
		whole.scan(data, tw)
		var split frameScanner
		ts := newStreamTable(1 << 30)
		rest := data
		for _, c := range cuts {
			k := min(int(c), len(rest))
			split.scan(rest[:k], ts)
			rest = rest[k:]
		}
		split.scan(rest, ts)
		if whole != split {
			t.Fatalf("whole scan %+v != split scan %+v", whole, split)
		}
	})
}
