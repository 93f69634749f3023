package sftp

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// stuckServer is a fake SFTP server that answers the handshake, OPEN and
// (F)STAT at once and, while silent, holds every other reply (a server
// stopped with SIGSTOP, a network gone quiet); speak sends what it held,
// in order, and answers from then on.
type stuckServer struct {
	t    *testing.T
	size int // the file's, in every stat

	mu     sync.Mutex // serialises writes to w; guards silent and held
	w      io.WriteCloser
	silent bool
	held   [][]byte

	reqs [256]atomic.Int32 // requests received, by type
}

// stuckPipe returns a client of a stuckServer whose file has size bytes
// (byte i is byte(i*7)); shared, it reads through a packetReader, as from
// an SSH channel of hostgate's x/crypto copy (change 6), returned too.
func stuckPipe(t *testing.T, size int, shared bool) (*Client, *stuckServer, *packetReader) {
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	s := &stuckServer{t: t, size: size, w: sw}
	served := make(chan struct{})
	go func() {
		defer close(served)
		s.serve(sr)
	}()
	var rd io.Reader = cr
	var pr *packetReader
	if shared {
		pr = newPacketReader(t, cr, 15)
		rd = pr
	}
	c, err := NewClientPipe(rd, cw, MaxPacketUnchecked(255<<10), MaxConcurrentRequestsPerFile(32),
		UseConcurrentReads(true), UseConcurrentWrites(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cr.Close() // ends a write of the server's the client does not read
		_ = sw.Close()
		_ = c.Close()
		<-served
	})
	return c, s, pr
}

func (s *stuckServer) serve(r io.Reader) {
	for {
		typ, data, err := recvPacket(r, nil, 0, nil)
		if err != nil {
			return
		}
		if typ == sshFxpInit {
			s.send(false, reply(sshFxpVersion, sftpProtocolVersion, nil))
			continue
		}
		id, rest := unmarshalUint32(data)
		var out []byte
		hold := true
		switch typ {
		case sshFxpOpen:
			out, hold = reply(sshFxpHandle, id, marshalString(nil, "h")), false
		case sshFxpStat, sshFxpFstat, sshFxpLstat:
			attrs := marshalUint32(nil, sshFileXferAttrSize|sshFileXferAttrPermissions)
			attrs = marshalUint64(attrs, uint64(s.size))
			attrs = marshalUint32(attrs, 0o100644)
			out, hold = reply(sshFxpAttrs, id, attrs), false
		case sshFxpRead:
			_, rest = unmarshalString(rest)
			off, rest := unmarshalUint64(rest)
			n, _ := unmarshalUint32(rest)
			if off >= uint64(s.size) {
				out = reply(sshFxpStatus, id, statusBody(sshFxEOF))
				break
			}
			b := make([]byte, min(uint64(n), uint64(s.size)-off))
			for i := range b {
				b[i] = byte((off + uint64(i)) * 7)
			}
			out = dataReply(id, len(b), b)
		default:
			out = reply(sshFxpStatus, id, statusBody(sshFxOk))
		}
		s.reqs[typ].Add(1)
		s.send(hold, out)
	}
}

// statusBody is a status reply's body: code, an empty message and language.
func statusBody(code uint32) []byte {
	return marshalString(marshalString(marshalUint32(nil, code), ""), "")
}

func (s *stuckServer) send(hold bool, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if hold && s.silent {
		s.held = append(s.held, b)
		return
	}
	_, _ = s.w.Write(b)
}

func (s *stuckServer) hush() {
	s.mu.Lock()
	s.silent = true
	s.mu.Unlock()
}

func (s *stuckServer) speak() {
	s.mu.Lock()
	s.silent = false
	held := s.held
	s.held = nil
	go func() { // before any later reply; a client gone does not read them
		defer s.mu.Unlock()
		for _, b := range held {
			_, _ = s.w.Write(b)
		}
	}()
}

// waitFor waits until the server has received n requests of type typ.
func (s *stuckServer) waitFor(typ fxp, n int32) {
	s.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); s.reqs[typ].Load() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			s.t.Fatalf("the server received %d requests of type %v; waited for %d", s.reqs[typ].Load(), typ, n)
		}
	}
}

// hostgate: change 15. A File's calls waiting on a server that stopped
// answering (Read, ReadAt, WriteTo, Write, WriteAt, ReadFrom, Close)
// return Abort's error at once, Close after Abort does not wait, and the
// replies the server sends late are dropped, their pages given back,
// while the client goes on: a Stat and a new file's reads are answered.
// Without Abort failing the requests, every call waits for the server
// (here: the test's guard).
func TestHostgateAbortStuck(t *testing.T) {
	t.Run("pages", func(t *testing.T) { testAbortStuck(t, false) })
	t.Run("shared", func(t *testing.T) { testAbortStuck(t, true) })
}

func testAbortStuck(t *testing.T, shared bool) {
	const size = 4 << 20
	c, s, pr := stuckPipe(t, size, shared)
	paged := pagedBytes.Load()
	errStop := errors.New("stop")

	calls := []struct {
		name string
		req  fxp // what the call waits on
		call func(f *File) error
	}{
		{"Read", sshFxpRead, func(f *File) error { _, err := f.Read(make([]byte, 1000)); return err }},
		{"ReadAt", sshFxpRead, func(f *File) error { _, err := f.ReadAt(make([]byte, 3<<20), 0); return err }},
		{"WriteTo", sshFxpRead, func(f *File) error { _, err := f.WriteTo(io.Discard); return err }},
		{"Write", sshFxpWrite, func(f *File) error { _, err := f.Write(make([]byte, 1000)); return err }},
		{"WriteAt", sshFxpWrite, func(f *File) error { _, err := f.WriteAt(make([]byte, 3<<20), 0); return err }},
		{"ReadFrom", sshFxpWrite, func(f *File) error {
			_, err := f.ReadFromWithConcurrency(bytes.NewReader(make([]byte, 3<<20)), 0)
			return err
		}},
		{"Close", sshFxpClose, func(f *File) error { return f.Close() }},
	}
	for _, tc := range calls {
		f, err := c.OpenFile("/f", os.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		s.hush()
		before := s.reqs[tc.req].Load()
		done := make(chan error, 1)
		go func() { done <- tc.call(f) }()
		s.waitFor(tc.req, before+1)
		f.Abort(errStop)
		select {
		case err := <-done:
			if tc.name == "Close" {
				if err != nil {
					t.Errorf("Close in flight, then Abort: %v; want nil", err)
				}
			} else if !errors.Is(err, errStop) {
				t.Errorf("%s in flight, then Abort: %v; want Abort's error", tc.name, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s in flight: still waiting 20 s after Abort", tc.name)
		}
		// Later calls fail at once, unsent; Close does not wait.
		sent := s.reqs[sshFxpFstat].Load()
		if _, err := f.Stat(); tc.name != "Close" && !errors.Is(err, errStop) {
			t.Errorf("%s: Stat after Abort: %v; want Abort's error", tc.name, err)
		}
		if n := s.reqs[sshFxpFstat].Load(); n != sent {
			t.Errorf("%s: Stat after Abort was sent", tc.name)
		}
		closes := s.reqs[sshFxpClose].Load()
		if err := f.Close(); tc.name == "Close" && !errors.Is(err, os.ErrClosed) || tc.name != "Close" && err != nil {
			t.Errorf("%s: Close after Abort: %v", tc.name, err)
		} else if tc.name != "Close" {
			s.waitFor(sshFxpClose, closes+1) // sent, so that the server lets the handle go
		}
		f.Abort(errors.New("again")) // a second Abort changes nothing
	}

	// The server answers again: the late replies are dropped, the client
	// goes on.
	s.speak()
	fi, err := c.Stat("/f")
	if err != nil || fi.Size() != size {
		t.Fatalf("Stat after the late replies: %v, %v", fi, err)
	}
	if n := pagedBytes.Load() - paged; n != 0 {
		t.Errorf("pages of the late replies not given back: %d bytes", n)
	}
	if shared {
		if n := pr.held(); n != 0 {
			t.Errorf("%d channel packets of the late replies not given back", n)
		}
	}
	c.clientConn.Lock()
	left := len(c.inflight)
	c.clientConn.Unlock()
	if left != 0 {
		t.Errorf("%d requests left in flight after every reply came", left)
	}
	f, err := c.Open("/f")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if n, err := f.WriteTo(&got); err != nil || n != size {
		t.Fatalf("WriteTo after: %d, %v", n, err)
	}
	for i, b := range got.Bytes() {
		if b != byte(i*7) {
			t.Fatalf("WriteTo after: byte %d is %d; want %d", i, b, byte(i*7))
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
