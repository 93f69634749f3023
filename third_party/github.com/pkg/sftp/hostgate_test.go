package sftp

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hostgate: change 2 (HOSTGATE.md). Writes through one handle run one at
// a time, whatever the number of server workers; other calls pass through.
func TestHostgateSerialWrites(t *testing.T) {
	svr := &Server{openFiles: make(map[string]file)}
	ff := &concurrencyFile{}
	f, ok := svr.getHandle(svr.nextHandle(ff))
	if !ok {
		t.Fatal("handle not found")
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				if _, err := f.WriteAt([]byte{1}, int64(i*100+j)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if got := ff.most.Load(); got != 1 {
		t.Fatalf("%d writes ran at once through one handle, want 1", got)
	}
	if ff.writes.Load() != 160 {
		t.Fatalf("%d writes reached the file, want 160", ff.writes.Load())
	}
	if f.Name() != "fake" {
		t.Fatal("calls other than WriteAt do not reach the file")
	}
}

// concurrencyFile records how many WriteAt calls overlap at most.
type concurrencyFile struct {
	os.File           // not used; fills the interface
	now, most, writes atomic.Int64
}

func (f *concurrencyFile) WriteAt(b []byte, off int64) (int, error) {
	n := f.now.Add(1)
	for {
		m := f.most.Load()
		if n <= m || f.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(50 * time.Microsecond) // let other writers arrive
	f.now.Add(-1)
	f.writes.Add(1)
	return len(b), nil
}

func (f *concurrencyFile) Name() string { return "fake" }

// hostgate: change 3 (HOSTGATE.md). Requests sent without waiting go out
// in call order (an lstat behind an exclusive create sees the file); a
// read reply nobody waits for is never written into its buffer; a closed
// file refuses further requests.
func TestHostgateNoWait(t *testing.T) {
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	srv, err := NewServer(struct {
		io.Reader
		io.WriteCloser
	}{sr, sw})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve()
		_ = sw.Close() // ends the client's receive loop
	}()
	c, err := NewClientPipe(cr, cw)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = c.Close()
		<-served
	}()

	name := filepath.Join(t.TempDir(), "f")
	open := c.OpenFileNoWait(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	lstat := c.LstatNoWait(name)
	f, err := open.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := lstat.Wait(); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("lstat sent behind the create: %v, %v", fi, err)
	}
	w := f.WriteAtNoWait([]byte("hello"), 0)
	if n, err := w.Wait(); n != 5 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	if _, err := f.CloseNoWait().Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAtNoWait(make([]byte, 1), 0).Wait(); err != os.ErrClosed {
		t.Fatalf("read after close: %v", err)
	}

	r, err := c.OpenFileNoWait(name, os.O_RDONLY).Wait()
	if err != nil {
		t.Fatal(err)
	}
	dropped := make([]byte, 5)
	_ = r.ReadAtNoWait(dropped, 0)
	b := make([]byte, 10)
	if n, err := r.ReadAtNoWait(b, 1).Wait(); n != 4 || err != nil || string(b[:n]) != "ello" {
		t.Fatalf("read = %q, %v", b[:n], err)
	}
	if _, err := r.ReadAtNoWait(b, 5).Wait(); err != io.EOF {
		t.Fatalf("read at the end: %v", err)
	}
	if !bytes.Equal(dropped, make([]byte, 5)) {
		t.Fatalf("a reply nobody waited for was written: %q", dropped)
	}
	if _, err := r.CloseNoWait().Wait(); err != nil {
		t.Fatal(err)
	}
}

// hostgate: change 4 (HOSTGATE.md). A directory's first READDIR answer
// starts with "." and "..", later ones do not, and an empty directory's
// first answer is the two of them rather than EOF; long names pad the
// day to two columns.
func TestHostgateReaddirDots(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	svr := &Server{openFiles: make(map[string]file)}
	names := func(d string) [][]string {
		fh, err := os.Open(d)
		if err != nil {
			t.Fatal(err)
		}
		h := svr.nextHandle(fh)
		defer func() { _ = svr.closeHandle(h) }()
		var pages [][]string
		for range 4 {
			r := (&sshFxpReaddirPacket{ID: 1, Handle: h}).respond(svr)
			np, ok := r.(*sshFxpNamePacket)
			if !ok {
				break
			}
			var page []string
			for _, na := range np.NameAttrs {
				page = append(page, na.Name)
			}
			pages = append(pages, page)
		}
		return pages
	}
	if got := fmt.Sprint(names(dir)); got != "[[. .. empty f]]" && got != "[[. .. f empty]]" {
		t.Errorf("readdir pages %s, want [[. .. empty f]]", got)
	}
	if got := fmt.Sprint(names(empty)); got != "[[. ..]]" {
		t.Errorf("empty directory: readdir pages %s, want [[. ..]]", got)
	}
	fi, err := os.Stat(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	old := time.Date(2020, 1, 5, 12, 0, 0, 0, time.Local)
	if got := runLs(nil, renamedInfo{oldInfo{fi, old}, "f"}); !strings.HasSuffix(got, " Jan  5  2020 f") {
		t.Errorf("long name %q, want the date as \"Jan  5  2020\"", got)
	}
}

type oldInfo struct {
	os.FileInfo
	t time.Time
}

func (o oldInfo) ModTime() time.Time { return o.t }

// hostgate: change 5 (HOSTGATE.md). A DATA reply goes out from the
// bytes the file read, its header in the room left in front of them: no
// byte is moved between the read and the write, with the allocator (as
// hostgate's agent runs) or without it.
func TestHostgateReadReplyInPlace(t *testing.T) {
	for _, alloc := range []bool{false, true} {
		t.Run(fmt.Sprintf("allocator=%v", alloc), func(t *testing.T) {
			const size = 200000 // past half a batch (change 23): not copied
			s := newReplyServer(t, alloc, size)
			s.read(1234)
			got := <-s.sent
			if len(got) != dataHeaderLen+size {
				t.Fatalf("one write of %d bytes, want the whole reply, %d", len(got), dataHeaderLen+size)
			}
			var want []byte
			want = marshalUint32(want, uint32(len(got)-4))
			want = append(want, sshFxpData)
			want = marshalUint32(want, 1234)
			want = marshalUint32(want, size)
			if !bytes.Equal(got[:dataHeaderLen], want) {
				t.Fatalf("header % x, want % x", got[:dataHeaderLen], want)
			}
			if !bytes.Equal(got[dataHeaderLen:], s.f.data[:size]) {
				t.Fatal("the reply's data differs from the file's")
			}
			if &got[dataHeaderLen] != &s.f.last[0] {
				t.Fatal("the reply's data was copied from where the file read it")
			}
		})
	}
}

// BenchmarkHostgateReadReply is the server's cost per 255 KiB read
// request from the worker to the connection's Write (a file that costs
// one copy, as a read from the page cache does).
func BenchmarkHostgateReadReply(b *testing.B) {
	const size = 255 << 10
	s := newReplyServer(b, true, size)
	b.SetBytes(size)
	for b.Loop() {
		s.read(1)
		<-s.sent
	}
}

type replyServer struct {
	svr  *Server
	f    *readFile
	h    string
	size uint32
	sent chan []byte // each Write's bytes, not copied
}

func newReplyServer(tb testing.TB, alloc bool, size uint32) *replyServer {
	s := &replyServer{f: &readFile{data: bytes.Repeat([]byte("hostgate"), int(size)/8+1)}, size: size, sent: make(chan []byte, 1)}
	opts := []ServerOption{WithMaxTxPacket(size)}
	if alloc {
		opts = append(opts, WithAllocator())
	}
	svr, err := NewServer(struct {
		io.Reader
		io.WriteCloser
	}{strings.NewReader(""), writeFunc(func(p []byte) (int, error) { s.sent <- p; return len(p), nil })}, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { svr.pktMgr.close() })
	s.svr, s.h = svr, svr.nextHandle(s.f)
	return s
}

// read has the server answer one READ request of size bytes.
func (s *replyServer) read(id uint32) {
	s.svr.pktMgr.hold() // as Serve does
	req := s.svr.pktMgr.newOrderedRequest(&sshFxpReadPacket{ID: id, Handle: s.h, Len: s.size})
	s.svr.pktMgr.incomingPacket(req)
	if err := handlePacket(s.svr, req); err != nil {
		panic(err)
	}
}

// readFile reads from data and remembers the last buffer it read into.
type readFile struct {
	os.File // not used; fills the interface
	data    []byte
	last    []byte
}

func (f *readFile) ReadAt(b []byte, off int64) (int, error) {
	f.last = b
	return copy(b, f.data[off:]), nil
}

type writeFunc func([]byte) (int, error)

func (w writeFunc) Write(p []byte) (int, error) { return w(p) }
func (w writeFunc) Close() error                { return nil }

// hostgate: change 17 (HOSTGATE.md). copy-data copies a range of one open
// file into another at an offset, to the end with length 0; a handle that
// is not open or a copy onto the range it reads fails and writes nothing.
func TestHostgateCopyData(t *testing.T) {
	dir := t.TempDir()
	open := func(name string, flag int) *os.File {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(dir, name), flag, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	if err := os.WriteFile(filepath.Join(dir, "src"), []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	svr := &Server{openFiles: make(map[string]file)}
	rh, wh := svr.nextHandle(open("src", os.O_RDWR)), svr.nextHandle(open("dst", os.O_RDWR|os.O_CREATE))
	status := func(p *sshFxpExtendedPacketCopyData) uint32 {
		t.Helper()
		return p.respond(svr).(*sshFxpStatusPacket).StatusError.Code
	}
	if c := status(&sshFxpExtendedPacketCopyData{ID: 1, ReadHandle: rh, ReadOffset: 2, ReadLength: 3, WriteHandle: wh, WriteOffset: 1}); c != sshFxOk {
		t.Fatalf("range copy: status %d", c)
	}
	if c := status(&sshFxpExtendedPacketCopyData{ID: 2, ReadHandle: rh, ReadOffset: 7, WriteHandle: wh, WriteOffset: 4}); c != sshFxOk {
		t.Fatalf("copy to the end: status %d", c)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "dst")); string(got) != "\x00234789" {
		t.Fatalf("dst is %q, want %q", got, "\x00234789")
	}
	for _, p := range []*sshFxpExtendedPacketCopyData{
		{ID: 3, ReadHandle: "99", WriteHandle: wh},
		{ID: 4, ReadHandle: rh, WriteHandle: rh, ReadOffset: 0, ReadLength: 5, WriteOffset: 3},
		{ID: 5, ReadHandle: rh, WriteHandle: rh, ReadOffset: 2, WriteOffset: 9},
		{ID: 6, ReadHandle: rh, WriteHandle: wh, ReadOffset: 1 << 63},
	} {
		if c := status(p); c == sshFxOk {
			t.Errorf("%+v: succeeded", *p)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "src")); string(got) != "0123456789" {
		t.Fatalf("a refused copy changed src: %q", got)
	}
	// To the end through a second handle on the same file, writing past
	// what it reads: it copies the file as it was, and ends (it grew the
	// file without end, reading its own writes).
	again := svr.nextHandle(open("src", os.O_RDWR))
	done := make(chan uint32, 1)
	go func() {
		done <- status(&sshFxpExtendedPacketCopyData{ID: 8, ReadHandle: rh, WriteHandle: again, WriteOffset: 10})
	}()
	select {
	case c := <-done:
		if c != sshFxOk {
			t.Fatalf("copy to the end of the file itself: status %d", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a copy to the end of the file itself, past what it reads, did not end")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "src")); string(got) != "01234567890123456789" {
		t.Fatalf("src after copying itself to its end: %q", got)
	}
	// Its wire form, as OpenSSH's sftp sends it.
	b := marshalUint32(nil, 7)
	b = marshalString(b, "copy-data")
	b = marshalString(b, rh)
	b = marshalUint64(b, 1)
	b = marshalUint64(b, 0)
	b = marshalString(b, wh)
	b = marshalUint64(b, 0)
	var ext sshFxpExtendedPacket
	if err := ext.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if p, ok := ext.SpecificPacket.(*sshFxpExtendedPacketCopyData); !ok || *p != (sshFxpExtendedPacketCopyData{ID: 7, ExtendedRequest: "copy-data", ReadHandle: rh, ReadOffset: 1, WriteHandle: wh}) {
		t.Fatalf("parsed %#v", ext.SpecificPacket)
	}
	if err := ext.UnmarshalBinary(b[:len(b)-1]); err == nil {
		t.Fatal("a short copy-data parsed")
	}
}

// hostgate: change 26 (HOSTGATE.md). A copy-data that would run for ever
// (2^62 bytes from /dev/zero to /dev/null) stops when its session ends:
// when the client's input ends (as OpenSSH's sftp-server exits at the end
// of its input), Serve returns, the copy with it; and Close ends a session
// whose copy holds 70 reads behind it, past the session's request slots.
func TestHostgateCopyDataEndsWithSession(t *testing.T) {
	for _, byClose := range []bool{false, true} {
		name := "input ends"
		if byClose {
			name = "Close"
		}
		t.Run(name, func(t *testing.T) { hostgateCopyDataEnds(t, byClose) })
	}
}

func hostgateCopyDataEnds(t *testing.T, byClose bool) {
	cr, cw := io.Pipe() // client to server
	sr, sw := io.Pipe() // server to client
	go func() { _, _ = io.Copy(io.Discard, sr) }()
	svr, err := NewServer(pipePair{cr, sw}, WithAllocator())
	if err != nil {
		t.Fatal(err)
	}
	open := func(name string, flag int) string {
		f, err := os.OpenFile(name, flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		return svr.nextHandle(f)
	}
	zero, null := open("/dev/zero", os.O_RDONLY), open("/dev/null", os.O_WRONLY)
	served := make(chan error, 1)
	go func() { served <- svr.Serve() }()
	send := func(typ byte, b []byte) {
		t.Helper()
		pkt := marshalUint32(nil, uint32(len(b)+1))
		pkt = append(append(pkt, typ), b...)
		if _, err := cw.Write(pkt); err != nil {
			t.Fatal(err)
		}
	}
	send(byte(sshFxpInit), marshalUint32(nil, 3))
	b := marshalUint32(nil, 1)
	b = marshalString(b, "copy-data")
	b = marshalString(b, zero)
	b = marshalUint64(b, 0)
	b = marshalUint64(b, 1<<62)
	b = marshalString(b, null)
	b = marshalUint64(b, 0)
	send(byte(sshFxpExtended), b)
	if byClose {
		go func() { // the server stops reading at its 64th request held
			for id := uint32(2); id < 72; id++ {
				b := marshalUint32(nil, id)
				b = marshalString(b, zero)
				b = marshalUint64(b, 0)
				b = marshalUint32(b, 32<<10)
				pkt := marshalUint32(nil, uint32(len(b)+1))
				if _, err := cw.Write(append(append(pkt, byte(sshFxpRead)), b...)); err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond) // the copy under way
	select {
	case err := <-served:
		t.Fatalf("Serve returned while the copy ran: %v", err)
	default:
	}
	how := "the client's input ended"
	if byClose {
		how = "Close"
		_ = svr.Close()
	} else {
		_ = cw.Close()
	}
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatalf("Serve has not returned 10 s after %s, a copy of 2^62 bytes running", how)
	}
	_ = cw.Close()
	_ = sr.Close()
}

// pipePair is a server's connection over two pipes; Close closes both, as
// an SSH channel's does.
type pipePair struct {
	r *io.PipeReader
	w *io.PipeWriter
}

func (p pipePair) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p pipePair) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipePair) Close() error {
	_ = p.r.Close()
	return p.w.Close()
}

// syncFile counts the Syncs of the file it wraps.
type syncFile struct {
	*os.File
	syncs int
}

func (f *syncFile) Sync() error { f.syncs++; return f.File.Sync() }

// hostgate: change 20 (HOSTGATE.md). The server offers fsync@openssh.com
// and answers it by syncing the handle's file: the client's File.Sync
// (which asks only a server that offers it, as OpenSSH's sftp `put -f`
// and sshfs do) succeeds, a handle that is not open fails with EBADF,
// and the request parses as OpenSSH sends it.
func TestHostgateFsync(t *testing.T) {
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	srv, err := NewServer(struct {
		io.Reader
		io.WriteCloser
	}{sr, sw})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	c, err := NewClientPipe(cr, cw)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.HasExtension("fsync@openssh.com"); !ok {
		t.Error("the server does not offer fsync@openssh.com")
	}
	name := filepath.Join(t.TempDir(), "f")
	f, err := c.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("durable")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Errorf("Sync: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// The server ends at its input's end and leaves its output open: the
	// client's reader ends once that is closed too.
	_ = cw.Close()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	_ = sw.Close()
	_ = c.Close()

	osf, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer osf.Close()
	sf := &syncFile{File: osf}
	svr := &Server{openFiles: make(map[string]file)}
	h := svr.nextHandle(sf)
	status := func(p *sshFxpExtendedPacketFsync) uint32 {
		t.Helper()
		return p.respond(svr).(*sshFxpStatusPacket).StatusError.Code
	}
	if c := status(&sshFxpExtendedPacketFsync{ID: 1, Handle: h}); c != sshFxOk || sf.syncs != 1 {
		t.Errorf("fsync of an open handle: status %d, %d syncs, want OK and 1", c, sf.syncs)
	}
	if c := status(&sshFxpExtendedPacketFsync{ID: 2, Handle: "99"}); c == sshFxOk {
		t.Error("fsync of a handle that is not open succeeded")
	}
	b := marshalUint32(nil, 7)
	b = marshalString(b, "fsync@openssh.com")
	b = marshalString(b, h)
	var ext sshFxpExtendedPacket
	if err := ext.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if p, ok := ext.SpecificPacket.(*sshFxpExtendedPacketFsync); !ok || *p != (sshFxpExtendedPacketFsync{ID: 7, ExtendedRequest: "fsync@openssh.com", Handle: h}) {
		t.Fatalf("parsed %#v", ext.SpecificPacket)
	}
	if err := ext.UnmarshalBinary(b[:len(b)-1]); err == nil {
		t.Fatal("a short fsync parsed")
	}
}
