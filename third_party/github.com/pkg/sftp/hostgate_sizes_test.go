package sftp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// sizeLog sits between a client and this package's server and records
// the data size of every READ and WRITE request. With limits set it
// offers limits@openssh.com in the VERSION answer and answers it.
type sizeLog struct {
	limits *[4]uint64 // packet, read, write lengths, open handles; nil: not offered
	// hold, when not nil, holds the limits' answer until it is closed
	// (change 27): a server that is slow to answer them, or never does.
	hold chan struct{}

	mu      sync.Mutex
	toCl    io.WriteCloser // the client's end; whole packets only, under mu
	pending []byte         // the server's bytes of a packet not yet whole
	started bool
	reads   []uint32
	writes  []uint32
	asked   int // limits requests
}

// take returns the sizes recorded since the last take.
func (l *sizeLog) take() (reads, writes []uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	reads, writes = l.reads, l.writes
	l.reads, l.writes = nil, nil
	return reads, writes
}

// Write takes the server's output and passes it on a whole packet at a
// time, the first (VERSION) with limits@openssh.com added.
func (l *sizeLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending = append(l.pending, p...)
	for len(l.pending) >= 4 {
		end := 4 + int(binary.BigEndian.Uint32(l.pending))
		if len(l.pending) < end {
			break
		}
		pkt := l.pending[:end]
		if !l.started {
			l.started = true
			if l.limits != nil {
				pkt = append(pkt[:end:end], marshalString(marshalString(nil, extLimits), "1")...)
				binary.BigEndian.PutUint32(pkt, uint32(len(pkt)-4))
			}
		}
		if _, err := l.toCl.Write(pkt); err != nil {
			return 0, err
		}
		l.pending = l.pending[end:]
	}
	return len(p), nil
}

func (l *sizeLog) Close() error { return l.toCl.Close() }

// pass reads the client's requests from r, records them and hands them
// to the server through w, but for limits@openssh.com, answered here.
func (l *sizeLog) pass(r io.Reader, w io.WriteCloser) {
	defer w.Close()
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		pkt := make([]byte, 4+binary.BigEndian.Uint32(hdr[:]))
		copy(pkt, hdr[:])
		if _, err := io.ReadFull(r, pkt[4:]); err != nil {
			return
		}
		body := pkt[5:]
		switch pkt[4] {
		case sshFxpRead, sshFxpWrite:
			_, rest := unmarshalUint32(body) // id
			_, rest = unmarshalString(rest)  // handle
			_, rest = unmarshalUint64(rest)  // offset
			n, _ := unmarshalUint32(rest)    // length, or the data's
			l.mu.Lock()
			if pkt[4] == sshFxpRead {
				l.reads = append(l.reads, n)
			} else {
				l.writes = append(l.writes, n)
			}
			l.mu.Unlock()
		case sshFxpExtended:
			id, rest := unmarshalUint32(body)
			if name, _ := unmarshalString(rest); name == extLimits && l.limits != nil {
				b := []byte{0, 0, 0, 0, sshFxpExtendedReply}
				b = marshalUint32(b, id)
				for _, v := range l.limits {
					b = marshalUint64(b, v)
				}
				binary.BigEndian.PutUint32(b, uint32(len(b)-4))
				l.mu.Lock()
				l.asked++
				l.mu.Unlock()
				if l.hold != nil {
					go func() {
						<-l.hold
						l.mu.Lock()
						defer l.mu.Unlock()
						_, _ = l.toCl.Write(b)
					}()
					continue
				}
				l.mu.Lock()
				_, err := l.toCl.Write(b)
				l.mu.Unlock()
				if err != nil {
					return
				}
				continue
			}
		}
		if _, err := w.Write(pkt); err != nil {
			return
		}
	}
}

// sizePipe serves this package's server (at most serverMax bytes a read
// answer) to a client of 255 KiB packets, 32 requests a file, through a
// sizeLog.
func sizePipe(t *testing.T, serverMax uint32, limits *[4]uint64) (*Client, *sizeLog) {
	return sizeLogPipe(t, serverMax, &sizeLog{limits: limits})
}

// sizeLogPipe is sizePipe through l.
func sizeLogPipe(t *testing.T, serverMax uint32, l *sizeLog) (*Client, *sizeLog) {
	cr, lw := io.Pipe() // to the client
	lr, cw := io.Pipe() // from the client
	sr, sw := io.Pipe() // to the server
	l.toCl = lw
	go l.pass(lr, sw)
	srv, err := NewServer(struct {
		io.Reader
		io.WriteCloser
	}{sr, l}, WithMaxTxPacket(serverMax))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve()
		_ = l.Close()
	}()
	c, err := NewClientPipe(cr, cw, MaxPacketUnchecked(255<<10), MaxConcurrentRequestsPerFile(32),
		UseConcurrentReads(true), UseConcurrentWrites(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		<-served
	})
	return c, l
}

func randomFile(t *testing.T, size int, seed uint64) (string, []byte) {
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return name, data
}

func countAbove(sizes []uint32, limit uint32) (n int) {
	for _, s := range sizes {
		if s > limit {
			n++
		}
	}
	return n
}

// hostgate: change 8 (HOSTGATE.md). A server that answers reads short
// (this package's, at 32 and at 64 KiB) gets, after its first short
// answer inside a file, requests of its answer's size, for the rest of
// that download and every later one, and the download still gets every
// byte. Before, every request asked for 255 KiB and was answered in
// several steps.
func TestHostgateReadSizeLearned(t *testing.T) {
	for _, serverMax := range []uint32{32 << 10, 64 << 10} {
		c, l := sizePipe(t, serverMax, nil)
		name, data := randomFile(t, 12<<20+333, uint64(serverMax))
		download := func(what string) []uint32 {
			f, err := c.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var got bytes.Buffer
			if n, err := f.WriteTo(&got); err != nil || n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
				t.Errorf("%d: %s: WriteTo: %d, %v, same bytes %v", serverMax, what, n, err, bytes.Equal(got.Bytes(), data))
			}
			reads, _ := l.take()
			return reads
		}
		first := download("first download")
		// The first wave goes out at 255 KiB before any answer: at most
		// the 32 requests of the budget (8 MiB), and the rest of the
		// 12 MiB file asks for what the server answers.
		if n := countAbove(first, serverMax); n > 32 {
			t.Errorf("%d: first download: %d of %d reads asked for more than the server answers; want at most 32", serverMax, n, len(first))
		}
		if got := c.ReadSize(); got != int(serverMax) {
			t.Errorf("%d: ReadSize after a download: %d; want %d", serverMax, got, serverMax)
		}
		second := download("second download")
		if n := countAbove(second, serverMax); n > 0 {
			t.Errorf("%d: second download: %d of %d reads asked for more than the server answers; want none", serverMax, n, len(second))
		}
		// Each answer is whole: one read per chunk and the one that
		// hears the end, not several.
		if want := len(data)/int(serverMax) + 2; len(second) > want {
			t.Errorf("%d: second download: %d reads; want at most %d", serverMax, len(second), want)
		}

		f, err := c.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, len(data))
		if n, err := f.ReadAt(b, 0); n != len(data) || (err != nil && err != io.EOF) || !bytes.Equal(b, data) {
			t.Errorf("%d: ReadAt: %d, %v, same bytes %v", serverMax, n, err, bytes.Equal(b, data))
		}
		if _, err := io.ReadFull(f, b[:200<<10]); err != nil || !bytes.Equal(b[:200<<10], data[:200<<10]) {
			t.Errorf("%d: Read: %v", serverMax, err)
		}
		_ = f.Close()
		if reads, _ := l.take(); countAbove(reads, serverMax) > 0 {
			t.Errorf("%d: ReadAt and Read: %d of %d reads asked for more than the server answers", serverMax, countAbove(reads, serverMax), len(reads))
		}
	}
}

// hostgate: change 8. A server that offers limits@openssh.com gets reads
// and writes within its limits, from the first request on, through every
// path that reads or writes a file; without the limits a server that
// takes smaller writes than ours would refuse them.
func TestHostgateLimits(t *testing.T) {
	const readMax, writeMax = 40000, 20000
	c, l := sizePipe(t, readMax, &[4]uint64{256 << 10, readMax, writeMax, 0})
	if got := c.ReadSize(); got != readMax {
		t.Errorf("ReadSize: %d; want %d", got, readMax)
	}
	if got := c.WriteSize(); got != writeMax {
		t.Errorf("WriteSize: %d; want %d", got, writeMax)
	}
	name, data := randomFile(t, 3<<20+5, 9)
	f, err := c.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if n, err := f.WriteTo(&got); err != nil || n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
		t.Errorf("WriteTo: %d, %v, same bytes %v", n, err, bytes.Equal(got.Bytes(), data))
	}
	b := make([]byte, len(data))
	if n, err := f.ReadAt(b, 0); n != len(data) || (err != nil && err != io.EOF) || !bytes.Equal(b, data) {
		t.Errorf("ReadAt: %d, %v", n, err)
	}
	_ = f.Close()

	out := filepath.Join(filepath.Dir(name), "out")
	w, err := c.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.ReadFrom(bytes.NewReader(data)); err != nil || n != int64(len(data)) {
		t.Errorf("ReadFrom: %d, %v", n, err)
	}
	if n, err := w.WriteAt(data[:1<<20], 0); err != nil || n != 1<<20 {
		t.Errorf("WriteAt: %d, %v", n, err)
	}
	if n, err := w.WriteAtNoWait(data[:100000], 0).Wait(); err != nil || n != writeMax {
		t.Errorf("WriteAtNoWait: %d, %v; want %d", n, err, writeMax)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if written, err := os.ReadFile(out); err != nil || !bytes.Equal(written, data) {
		t.Errorf("written file: %v, same bytes %v", err, bytes.Equal(written, data))
	}

	reads, writes := l.take()
	if n := countAbove(reads, readMax); n > 0 || len(reads) == 0 {
		t.Errorf("%d of %d reads asked for more than %d", n, len(reads), readMax)
	}
	if n := countAbove(writes, writeMax); n > 0 || len(writes) == 0 {
		t.Errorf("%d of %d writes carried more than %d", n, len(writes), writeMax)
	}
	if l.asked != 1 {
		t.Errorf("limits asked %d times; want 1", l.asked)
	}
}

// hostgate: change 8. Without limits@openssh.com offered, nothing is
// asked and the sizes are the client's packet until a short answer.
func TestHostgateNoLimits(t *testing.T) {
	c, l := sizePipe(t, 255<<10, nil)
	if c.ReadSize() != 255<<10 || c.WriteSize() != 255<<10 || l.asked != 0 {
		t.Errorf("ReadSize %d, WriteSize %d, limits asked %d times; want 255 KiB, 255 KiB, 0", c.ReadSize(), c.WriteSize(), l.asked)
	}
}

// hostgate: change 8. Limits below MinReadSize are taken as that: a
// server that answers limits@openssh.com with a 1-byte read and write
// length had every read and write request carry one byte, a request per
// byte of a file (found by the audit30b audit), where a short answer
// teaches no less than MinReadSize.
func TestHostgateTinyLimits(t *testing.T) {
	c, l := sizePipe(t, 255<<10, &[4]uint64{256 << 10, 1, 1, 0})
	if c.ReadSize() != MinReadSize || c.WriteSize() != MinReadSize {
		t.Errorf("ReadSize %d, WriteSize %d; want %d for both", c.ReadSize(), c.WriteSize(), MinReadSize)
	}
	const size = 64 << 10
	name, data := randomFile(t, size, 3)
	f, err := c.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if n, err := f.WriteTo(&got); err != nil || n != size || !bytes.Equal(got.Bytes(), data) {
		t.Errorf("WriteTo: %d, %v, same bytes %v", n, err, bytes.Equal(got.Bytes(), data))
	}
	_ = f.Close()
	w, err := c.Create(filepath.Join(filepath.Dir(name), "out"))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.Write(data); err != nil || n != size {
		t.Errorf("Write: %d, %v", n, err)
	}
	_ = w.Close()
	reads, writes := l.take()
	// One request per MinReadSize bytes, and a few past the end.
	if want := size/MinReadSize + 8; len(reads) > want || len(writes) > want {
		t.Errorf("%d reads and %d writes for %d bytes each way; want at most %d", len(reads), len(writes), size, want)
	}
}

// hostgate: change 27. A server that offers limits@openssh.com and does
// not answer them holds a caller of ReadSizeContext or WriteSizeContext
// no longer than its ctx, and a File's reads and writes no longer than
// its Abort; the answer, once it comes, is still taken, by the next
// caller. Before, each waited for the answer until the connection ended.
func TestHostgateLimitsUnanswered(t *testing.T) {
	const readMax, writeMax, learnt = 40000, 20000, 30000
	hold := make(chan struct{})
	var once sync.Once
	answer := func() { once.Do(func() { close(hold) }) }
	c, l := sizeLogPipe(t, readMax, &sizeLog{limits: &[4]uint64{256 << 10, readMax, writeMax, 0}, hold: hold})
	t.Cleanup(answer) // before the pipe's: its answer waits for it

	waitFor := func(what string, call func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second): // a guard against a hang, not a timing
			t.Fatalf("%s: still waiting for the unanswered limits 10 s later", what)
			return nil
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	go cancel()
	if err := waitFor("ReadSizeContext", func() error { _, err := c.ReadSizeContext(ctx); return err }); err != context.Canceled {
		t.Errorf("ReadSizeContext: %v; want %v", err, context.Canceled)
	}
	if err := waitFor("WriteSizeContext", func() error { _, err := c.WriteSizeContext(ctx); return err }); err != context.Canceled {
		t.Errorf("WriteSizeContext: %v; want %v", err, context.Canceled)
	}

	name, data := randomFile(t, 1<<20, 5)
	errAbort := errors.New("the test's abort")
	for _, call := range []struct {
		name string
		call func(f *File) error
	}{
		{"Read", func(f *File) error { _, err := f.Read(make([]byte, 100)); return err }},
		{"ReadAt", func(f *File) error { _, err := f.ReadAt(make([]byte, len(data)), 0); return err }},
		{"WriteTo", func(f *File) error { _, err := f.WriteTo(io.Discard); return err }},
		{"Write", func(f *File) error { _, err := f.Write(data[:100]); return err }},
		{"WriteAt", func(f *File) error { _, err := f.WriteAt(data, 0); return err }},
		{"ReadFrom", func(f *File) error { _, err := f.ReadFrom(bytes.NewReader(data)); return err }},
		{"ReadFromWithConcurrency", func(f *File) error { _, err := f.ReadFromWithConcurrency(bytes.NewReader(data), 0); return err }},
		{"WriteAtNoWait", func(f *File) error { _, err := f.WriteAtNoWait(data, 0).Wait(); return err }},
	} {
		f, err := c.OpenFile(name, os.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		f.Abort(errAbort)
		if err := waitFor(call.name, func() error { return call.call(f) }); err != errAbort {
			t.Errorf("%s of an aborted File: %v; want the abort's error", call.name, err)
		}
		_ = f.Close()
	}

	// A short answer teaches a read size without the limits; they keep it,
	// being larger.
	if n := waitFor("LearnReadSize", func() error {
		if n := c.LearnReadSize(learnt); n != learnt {
			return fmt.Errorf("LearnReadSize(%d): %d", learnt, n)
		}
		return nil
	}); n != nil {
		t.Error(n)
	}

	// A caller without a ctx waits for the answer, and gets it.
	got := make(chan int, 1)
	go func() { got <- c.ReadSize() }()
	answer()
	if n := <-got; n != learnt {
		t.Errorf("ReadSize once the limits came: %d; want %d (learnt before them)", n, learnt)
	}
	if n, err := c.WriteSizeContext(ctx); err != nil || n != writeMax {
		t.Errorf("WriteSizeContext once the limits came: %d, %v; want %d", n, err, writeMax)
	}
	f, err := c.OpenFile(name, os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if n, err := f.WriteTo(&buf); err != nil || !bytes.Equal(buf.Bytes(), data) {
		t.Errorf("WriteTo once the limits came: %d, %v, same bytes %v", n, err, bytes.Equal(buf.Bytes(), data))
	}
	if n, err := f.WriteAt(data, 0); err != nil || n != len(data) {
		t.Errorf("WriteAt once the limits came: %d, %v", n, err)
	}
	_ = f.Close()
	reads, writes := l.take()
	if n := countAbove(reads, learnt); n > 0 || len(reads) == 0 {
		t.Errorf("%d of %d reads asked for more than %d", n, len(reads), learnt)
	}
	if n := countAbove(writes, writeMax); n > 0 || len(writes) == 0 {
		t.Errorf("%d of %d writes carried more than %d", n, len(writes), writeMax)
	}
}
