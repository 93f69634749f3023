package sftp

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// hostgate: change 7 (HOSTGATE.md). A server may answer a READ with
// fewer bytes than asked for and no error, in the middle of a regular
// file: one whose largest reply is smaller than the client's packet (this
// package's own server at its 32 KiB default, against a client asking
// for 255 KiB). WriteTo and ReadAt read the whole file all the same;
// WriteTo's concurrent reads skipped the rest of each short chunk and
// returned no error.
func TestHostgateShortReads(t *testing.T) {
	data := make([]byte, 2<<20+777)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	srv, err := NewServer(struct {
		io.Reader
		io.WriteCloser
	}{sr, sw}) // replies of at most 32 KiB
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve()
		_ = sw.Close()
	}()
	c, err := NewClientPipe(cr, cw, MaxPacketUnchecked(255<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = c.Close()
		<-served
	}()
	f, err := c.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	var got bytes.Buffer
	n, err := f.WriteTo(&got)
	if err != nil || n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
		t.Errorf("WriteTo: %d bytes, %v, same bytes %v; want %d bytes", n, err, bytes.Equal(got.Bytes(), data), len(data))
	}
	if off, err := f.Seek(0, io.SeekCurrent); err != nil || off != int64(len(data)) {
		t.Errorf("offset after WriteTo: %d, %v; want %d", off, err, len(data))
	}

	b := make([]byte, len(data))
	rn, err := f.ReadAt(b, 0)
	if rn != len(data) || (err != nil && err != io.EOF) || !bytes.Equal(b, data) {
		t.Errorf("ReadAt: %d bytes, %v, same bytes %v; want %d bytes", rn, err, bytes.Equal(b, data), len(data))
	}
}

// readerFunc serves a file's reads through fn.
type readerFunc func(b []byte, off int64) (int, error)

func (fn readerFunc) ReadAt(b []byte, off int64) (int, error) { return fn(b, off) }

type getFunc func(*Request) (io.ReaderAt, error)

func (fn getFunc) Fileread(r *Request) (io.ReaderAt, error) { return fn(r) }

// requestPipe serves an in-memory file system holding one file of size
// bytes at /f, whose reads go through read, to a client asking for 255
// KiB a read.
func requestPipe(t *testing.T, size int, read readerFunc) *File {
	h := InMemHandler()
	mem := h.FileGet
	h.FileGet = getFunc(func(r *Request) (io.ReaderAt, error) {
		if _, err := mem.Fileread(r); err != nil {
			return nil, err
		}
		return read, nil
	})
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	srv := NewRequestServer(struct {
		io.Reader
		io.WriteCloser
	}{sr, sw}, h)
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve()
		_ = sw.Close()
	}()
	c, err := NewClientPipe(cr, cw, MaxPacketUnchecked(255<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		<-served
		_ = srv.Close()
	})
	w, err := c.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := c.Open("/f")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// hostgate: change 7. A server that answers reads inside a file with no
// bytes and no end of file gets an error, where the client asked again
// for ever; and one that answers with a few bytes at a time (here 1000,
// from a server of another make) is read to the end by every reader.
func TestHostgateServerReadsAnswers(t *testing.T) {
	const size = 600 << 10
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	small := requestPipe(t, size, func(b []byte, off int64) (int, error) {
		if off >= size {
			return 0, io.EOF
		}
		return copy(b[:min(len(b), 1000)], data[off:]), nil
	})
	var got bytes.Buffer
	if n, err := small.WriteTo(&got); err != nil || n != size || !bytes.Equal(got.Bytes(), data) {
		t.Errorf("WriteTo, 1000 bytes a reply: %d, %v, same bytes %v", n, err, bytes.Equal(got.Bytes(), data))
	}
	b := make([]byte, size)
	if n, err := small.ReadAt(b, 0); n != size || (err != nil && err != io.EOF) || !bytes.Equal(b, data) {
		t.Errorf("ReadAt, 1000 bytes a reply: %d, %v, same bytes %v", n, err, bytes.Equal(b, data))
	}
	if n, err := small.ReadAt(b[:5000], size-3000); n != 3000 || err != io.EOF || !bytes.Equal(b[:n], data[size-3000:]) {
		t.Errorf("ReadAt across the end: %d, %v; want 3000, EOF", n, err)
	}

	empty := requestPipe(t, size, func(b []byte, off int64) (int, error) { return 0, nil })
	done := make(chan struct{})
	go func() {
		defer close(done)
		if n, err := empty.ReadAt(b[:1000], 0); !errors.Is(err, errEmptyRead) {
			t.Errorf("ReadAt of one chunk, empty replies: %d, %v; want errEmptyRead", n, err)
		}
		if n, err := empty.ReadAt(b, 0); !errors.Is(err, errEmptyRead) {
			t.Errorf("ReadAt of chunks, empty replies: %d, %v; want errEmptyRead", n, err)
		}
		if _, err := empty.Seek(0, io.SeekStart); err != nil {
			t.Error(err)
		}
		if n, err := empty.WriteTo(io.Discard); !errors.Is(err, errEmptyRead) {
			t.Errorf("WriteTo, empty replies: %d, %v; want errEmptyRead", n, err)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("reads answered with no bytes still asking after 20 s")
	}
}

// hostgate: change 7, found by the audit29 audit. WriteTo knows a file's
// size from before it reads. A file that grows meanwhile, read from a
// server of small replies, was answered short past that size too, and
// WriteTo went on at the next chunk, leaving out the rest of each such
// chunk without an error; a server that answered reads past the end with
// no bytes and no end of file was asked on for ever.
func TestHostgateWriteToPastStatSize(t *testing.T) {
	const size, grown = 600 << 10, 1000 << 10
	data := make([]byte, grown)
	for i := range data {
		data[i] = byte(i * 7)
	}
	growing := requestPipe(t, size, func(b []byte, off int64) (int, error) {
		if off >= grown {
			return 0, io.EOF
		}
		return copy(b[:min(len(b), 1000)], data[off:]), nil
	})
	var got bytes.Buffer
	if n, err := growing.WriteTo(&got); err != nil || n != grown || !bytes.Equal(got.Bytes(), data) {
		t.Errorf("WriteTo of a file grown to %d bytes: %d, %v, same bytes %v", grown, n, err, bytes.Equal(got.Bytes(), data))
	}
	if off, err := growing.Seek(0, io.SeekCurrent); err != nil || off != grown {
		t.Errorf("offset after WriteTo: %d, %v; want %d", off, err, grown)
	}

	// Answered short at the size stat gave (20 KiB into a chunk, less
	// than the server's largest reply), then grown: the rest of that
	// chunk is read before the next chunk's bytes are written.
	const short = 2*255<<10 + 20<<10
	atSize := requestPipe(t, short, func(b []byte, off int64) (int, error) {
		if off >= grown {
			return 0, io.EOF
		}
		if off < short {
			return copy(b, data[off:short]), nil
		}
		return copy(b[:min(len(b), 1000)], data[off:]), nil
	})
	got.Reset()
	if n, err := atSize.WriteTo(&got); err != nil || n != grown || !bytes.Equal(got.Bytes(), data) {
		t.Errorf("WriteTo of a file grown to %d bytes, answered short at %d: %d, %v, same bytes %v", grown, short, n, err, bytes.Equal(got.Bytes(), data))
	}

	// Two whole chunks: no read inside them reads on past their end.
	const chunks = 2 * 255 << 10
	var pastEnd atomic.Int32
	empty := requestPipe(t, chunks, func(b []byte, off int64) (int, error) {
		if off < chunks {
			return copy(b, data[off:chunks]), nil
		}
		// Bounded, so that the client without the fix ends too.
		if pastEnd.Add(1) > 2000 {
			return 0, io.EOF
		}
		return 0, nil
	})
	if n, err := empty.WriteTo(io.Discard); !errors.Is(err, errEmptyRead) {
		t.Errorf("WriteTo, empty replies past the end: %d, %v (%d reads past it); want errEmptyRead", n, err, pastEnd.Load())
	}
}
