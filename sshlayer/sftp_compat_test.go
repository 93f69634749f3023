package sshlayer

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"
)

// fakeChannel reads from in and records what is written.
type fakeChannel struct {
	in  io.Reader
	mu  sync.Mutex
	out bytes.Buffer
}

func (f *fakeChannel) Read(p []byte) (int, error) { return f.in.Read(p) }
func (f *fakeChannel) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.out.Write(p)
}
func (f *fakeChannel) Close() error { return nil }

func rawPacket(typ byte, id uint32, body ...[]byte) []byte {
	b := sftpPacket(typ, id)
	for _, x := range body {
		b = append(b, x...)
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func str(s string) []byte { return sftpAppendString(nil, s) }

// fakeSFTP plays pkg/sftp: it reads what sftpCompat hands on, packet by
// packet, and answers each one (type 103, its id), as pkg/sftp answers
// every request. It returns the bytes it was handed.
func fakeSFTP(c *sftpCompat) []byte {
	var got []byte
	hdr := make([]byte, 4)
	for {
		if _, err := io.ReadFull(c, hdr); err != nil {
			return got
		}
		n := binary.BigEndian.Uint32(hdr)
		body, err := io.ReadAll(io.LimitReader(c, int64(n)))
		got = append(append(got, hdr...), body...)
		if err != nil || uint32(len(body)) < n {
			return got
		}
		var id uint32
		if len(body) >= 5 {
			id = binary.BigEndian.Uint32(body[1:])
		}
		_, _ = c.Write(rawPacket(103, id))
	}
}

// passedThrough is what sftpCompat should hand on from in: every packet
// but whole ones of a sane size that sftpCompat answers itself.
func passedThrough(in []byte) []byte {
	var out []byte
	for len(in) >= sftpHeaderSize {
		n := binary.BigEndian.Uint32(in)
		// The extension's name is looked for inside the packet only, as
		// the server does: a name cut by the packet's end is not ours.
		pkt := in[:min(uint64(len(in)), 4+uint64(n))]
		if (answered(in[4]) || ourExtension(pkt)) && n >= 1 && n <= sftpCompatMax {
			if uint64(len(in)) < 4+uint64(n) {
				break
			}
			in = in[4+n:]
			continue
		}
		k := min(uint64(len(in)), 4+uint64(n))
		out = append(out, in[:k]...)
		in = in[k:]
	}
	return append(out, in...)
}

// readPackets splits a stream into packets (type byte first).
func readPackets(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 4 {
			t.Fatalf("%d stray bytes", len(b))
		}
		n := binary.BigEndian.Uint32(b)
		if uint32(len(b)-4) < n {
			t.Fatalf("packet of %d bytes cut at %d", n, len(b)-4)
		}
		out = append(out, b[4:4+n])
		b = b[4+n:]
	}
	return out
}

// Every packet but those sftpCompat answers (SYMLINK, REALPATH, …) reaches
// pkg/sftp byte for byte and in order, however the channel splits them.
func TestSFTPCompatPassesOthersThrough(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "target"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("w"), 300<<10)
	var in, want bytes.Buffer
	for _, p := range [][]byte{
		rawPacket(1, 3, []byte{0, 0, 0, 3}),                 // INIT-like
		rawPacket(6, 7, str("file"), big),                   // a large WRITE
		rawPacket(fxpSymlink, 8, str("target"), str("lnk")), // answered here
		rawPacket(17, 9, str("file")),                       // STAT
		rawPacket(fxpRealpath, 10, str("lnk")),              // answered here
		rawPacket(fxpRealpath, 11, str("no/such/dir/x")),    // answered: no such file
	} {
		in.Write(p)
		if !answered(p[4]) {
			want.Write(p)
		}
	}
	ch := &fakeChannel{in: &randomChunks{r: bytes.NewReader(in.Bytes())}}
	c := newSFTPCompat(ch, dir)
	got := fakeSFTP(c)
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("pkg/sftp got %d bytes, want the %d passed through unchanged", len(got), want.Len())
	}
	if l, err := os.Readlink(filepath.Join(dir, "lnk")); err != nil || l != "target" {
		t.Errorf("symlink: %q %v, want a link to %q as given", l, err, "target")
	}
	var answers [][]byte
	for _, a := range readPackets(t, ch.out.Bytes()) {
		if a[0] != 103 { // the fake pkg/sftp's own
			answers = append(answers, a)
		}
	}
	if len(answers) != 3 {
		t.Fatalf("%d answers, want 3", len(answers))
	}
	if a := answers[0]; a[0] != fxpStatus || binary.BigEndian.Uint32(a[1:]) != 8 || binary.BigEndian.Uint32(a[5:]) != fxOK {
		t.Errorf("SYMLINK answer %q", a)
	}
	if a := answers[1]; a[0] != fxpName || binary.BigEndian.Uint32(a[1:]) != 10 || !bytes.Contains(a, []byte(filepath.Join(dir, "target"))) {
		t.Errorf("REALPATH answer %q, want the link resolved", a)
	}
	if a := answers[2]; a[0] != fxpStatus || binary.BigEndian.Uint32(a[5:]) != fxNoSuchFile {
		t.Errorf("REALPATH of a missing directory answered %q, want no such file", a)
	}
}

// randomChunks reads in random small pieces.
type randomChunks struct{ r io.Reader }

func (r *randomChunks) Read(p []byte) (int, error) {
	return r.r.Read(p[:min(len(p), 1+rand.IntN(9000))])
}

// Answers written while pkg/sftp writes its packets in pieces land only
// between whole packets.
func TestSFTPCompatAnswersBetweenPackets(t *testing.T) {
	ch := &fakeChannel{in: bytes.NewReader(nil)}
	c := newSFTPCompat(ch, t.TempDir())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range 2000 {
			p := rawPacket(103, uint32(i), bytes.Repeat([]byte{byte(i)}, i%700))
			cut := 1 + i%len(p)
			_, _ = c.Write(p[:cut])
			_, _ = c.Write(p[cut:])
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 500 {
			if err := c.writeStatus(uint32(100000+i), fxOK, ""); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	pkts := readPackets(t, ch.out.Bytes())
	data, status := 0, 0
	for _, p := range pkts {
		id := binary.BigEndian.Uint32(p[1:])
		switch p[0] {
		case 103:
			if len(p)-5 != int(id)%700 || (len(p) > 5 && p[5] != byte(id)) {
				t.Fatalf("packet %d torn", id)
			}
			data++
		case fxpStatus:
			status++
		default:
			t.Fatalf("unexpected packet type %d", p[0])
		}
	}
	if data != 2000 || status != 500 {
		t.Fatalf("%d data and %d status packets, want 2000 and 500", data, status)
	}
}

func FuzzSFTPCompat(f *testing.F) {
	f.Add(rawPacket(fxpExtended, 1, str(extExpandPath), str("~/x")))
	f.Add(rawPacket(fxpExtended, 1, str("limits@openssh.com")))
	f.Add(rawPacket(fxpExtended, 1, str(extPosixRename), str("a"), str("b")))
	f.Add(rawPacket(fxpExtended, 1, str("statvfs@openssh.com"), str("/")))
	f.Add(rawPacket(fxpSymlink, 1, str("a"), str("b")))
	f.Add(rawPacket(fxpRealpath, 2, str(".")))
	f.Add(rawPacket(fxpRemove, 1, str("a")))
	f.Add(rawPacket(fxpRmdir, 1, str("/")))
	f.Add(rawPacket(fxpExtended, 1, str(extUsersGroupsByID), str("\x00\x00\x00\x00"), str("\x00\x00")))
	f.Add(append(rawPacket(fxpRealpath, 3, []byte{0, 0, 0, 9}), rawPacket(5, 4, str("x"))...))
	f.Add([]byte{0, 0, 0, 1, fxpSymlink})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, fxpRealpath, 1, 2})
	f.Fuzz(func(t *testing.T, in []byte) {
		ch := &fakeChannel{in: bytes.NewReader(in)}
		c := newSFTPCompat(ch, t.TempDir())
		// Names come from the fuzzer: never create, move or delete anything.
		c.symlink = func(target, link string) error { return os.ErrPermission }
		c.rename = func(from, to string) error { return os.ErrPermission }
		c.unlink = func(string) error { return os.ErrPermission }
		c.rmdir = func(string) error { return os.ErrPermission }
		got := fakeSFTP(c) // a malformed packet may end the stream early
		if want := passedThrough(in); !bytes.HasPrefix(want, got) {
			t.Fatalf("handed on %x, not a prefix of the packets to pass %x", got, want)
		}
		readPackets(t, ch.out.Bytes()) // answers are whole packets
	})
}

// A packet's header may say any length: sftpCompat hands such a packet on
// (pkg/sftp refuses it at its header), whatever its type. On a 32-bit
// board (an agent on a Raspberry Pi's 32-bit OS: scripts/test runs this as
// a 32-bit binary) 4+int(length) from 2^31-4 on was negative or small: an
// OPEN of 2^31 bytes panicked the agent (a slice out of range), a REMOVE
// of 2^32-4 made Read loop for ever, handing nothing on.
func TestSFTPCompatHugeLengths(t *testing.T) {
	for _, length := range []uint32{1<<31 - 4, 1 << 31, 1<<32 - 4, 1<<32 - 1} {
		for _, typ := range []byte{3, fxpRemove, fxpExtended} {
			in := binary.BigEndian.AppendUint32(nil, length)
			in = append(in, typ, 0, 0, 0, 1)
			in = append(in, str(extLimits)...)
			ch := &fakeChannel{in: bytes.NewReader(in)}
			c := newSFTPCompat(ch, t.TempDir())
			c.symlink = func(target, link string) error { return os.ErrPermission }
			c.rename = func(from, to string) error { return os.ErrPermission }
			c.unlink = func(string) error { return os.ErrPermission }
			c.rmdir = func(string) error { return os.ErrPermission }
			done := make(chan []byte, 1)
			go func() { done <- fakeSFTP(c) }()
			select {
			case got := <-done:
				if want := passedThrough(in); !bytes.Equal(got, want) {
					t.Errorf("length %#x, type %d: handed on %x, want %x", length, typ, got, want)
				}
			case <-time.After(20 * time.Second): // a guard against a hang, not a timing
				t.Fatalf("length %#x, type %d: still reading 20 s on, nothing handed on", length, typ)
			}
		}
	}
}

// brokenChannel accepts n bytes, then fails every write.
type brokenChannel struct {
	fakeChannel
	left int
}

func (b *brokenChannel) Write(p []byte) (int, error) {
	if len(p) > b.left {
		n := b.left
		b.left = 0
		return n, io.ErrClosedPipe
	}
	b.left -= len(p)
	return len(p), nil
}

// A packet pkg/sftp could not finish writing (the channel failed in its
// middle) must not leave an answer waiting for its end forever.
func TestSFTPCompatAnswerAfterTornWrite(t *testing.T) {
	ch := &brokenChannel{fakeChannel: fakeChannel{in: bytes.NewReader(nil)}, left: 10}
	c := newSFTPCompat(ch, t.TempDir())
	p := rawPacket(103, 1, bytes.Repeat([]byte("x"), 100))
	if _, err := c.Write(p); err == nil {
		t.Fatal("write through a failing channel succeeded")
	}
	done := make(chan error, 1)
	go func() { done <- c.writeStatus(2, fxOK, "") }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("answer written after the channel failed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("answer still waiting for a packet that will never end")
	}
}

// A SYMLINK waits for the requests before it: pkg/sftp (here a fake that
// answers late) must have answered the MKDIR first.
func TestSFTPCompatKeepsRequestOrder(t *testing.T) {
	var in bytes.Buffer
	in.Write(rawPacket(14, 1, str("a"), []byte{0, 0, 0, 0})) // MKDIR a
	in.Write(rawPacket(fxpSymlink, 2, str("t"), str("a/l")))
	dir := t.TempDir()
	ch := &fakeChannel{in: &in}
	c := newSFTPCompat(ch, dir)
	var made []string
	c.symlink = func(target, link string) error {
		if _, err := os.Stat(filepath.Join(dir, "a")); err != nil {
			t.Errorf("SYMLINK ran before the MKDIR before it was answered")
		}
		made = append(made, link)
		return nil
	}
	hdr := make([]byte, 4)
	if _, err := io.ReadFull(c, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr))
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _, _ = io.ReadAll(c) }() // reaches the SYMLINK and waits
	time.Sleep(50 * time.Millisecond)
	if err := os.Mkdir(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(rawPacket(fxpStatus, 1, []byte{0, 0, 0, 0}, str(""), str(""))); err != nil {
		t.Fatal(err)
	}
	<-done
	if len(made) != 1 {
		t.Fatalf("symlinks made: %q", made)
	}
}

// expand-path@openssh.com, users-groups-by-id@openssh.com and
// limits@openssh.com are answered here, other extensions pass to pkg/sftp; pkg/sftp's VERSION answer goes out with it added, however it
// is written.
func TestSFTPCompatExtensions(t *testing.T) {
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	statvfs := rawPacket(fxpExtended, 4, str("statvfs@openssh.com"), str("/"))
	limits := rawPacket(fxpExtended, 3, str("limits@openssh.com"))
	var in bytes.Buffer
	for _, p := range [][]byte{
		rawPacket(fxpExtended, 1, str(extExpandPath), str("~")),
		rawPacket(fxpExtended, 2, str(extExpandPath), str("~/sub")),
		limits,
		statvfs,
		rawPacket(fxpExtended, 5, str(extExpandPath), str("~nosuchuser-hg/x")),
		rawPacket(fxpExtended, 6, str(extExpandPath), str("sub")),
		// This process's uid twice, then one without a name; no gids.
		rawPacket(fxpExtended, 7, str(extUsersGroupsByID), str(string(binary.BigEndian.AppendUint32(
			binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(os.Getuid())), uint32(os.Getuid())), 0xfffffff0))), str("")),
		rawPacket(fxpExtended, 8, str(extUsersGroupsByID), str("abc"), str("")), // not whole uint32s
	} {
		in.Write(p)
	}
	ch := &fakeChannel{in: &randomChunks{r: bytes.NewReader(in.Bytes())}}
	c := newSFTPCompat(ch, home)
	// pkg/sftp's VERSION, in two writes as its sendPacket may make them.
	version := rawPacket(fxpVersion, 3, str("hardlink@openssh.com"), str("1"))
	if _, err := c.Write(version[:7]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(version[7:]); err != nil {
		t.Fatal(err)
	}
	if got := fakeSFTP(c); !bytes.Equal(got, statvfs) {
		t.Fatalf("pkg/sftp got %q, want only the statvfs request", got)
	}
	pkts := readPackets(t, ch.out.Bytes())
	if v := pkts[0]; v[0] != fxpVersion || !bytes.Contains(v, []byte("hardlink@openssh.com")) || !bytes.Contains(v, []byte(extExpandPath)) || !bytes.Contains(v, []byte(extUsersGroupsByID)) || !bytes.Contains(v, []byte(extLimits)) {
		t.Fatalf("VERSION %q, want pkg/sftp's with expand-path, users-groups-by-id and limits added", v)
	}
	answers := map[uint32][]byte{}
	for _, p := range pkts[1:] {
		if p[0] != 103 {
			answers[binary.BigEndian.Uint32(p[1:])] = p
		}
	}
	name := func(id uint32, want string) {
		t.Helper()
		a := answers[id]
		if a == nil || a[0] != fxpName {
			t.Fatalf("answer %d: %q, want a NAME", id, a)
		}
		if got, _, _ := sftpString(a[9:]); got != want {
			t.Errorf("answer %d: %q, want %q", id, got, want)
		}
	}
	name(1, home)
	name(2, filepath.Join(home, "sub"))
	name(6, filepath.Join(home, "sub"))
	if a := answers[5]; a == nil || a[0] != fxpStatus || binary.BigEndian.Uint32(a[5:]) != fxNoSuchFile {
		t.Errorf("expand-path of an unknown user: %q, want no such file", a)
	}
	if me, err := user.Current(); err == nil {
		want := rawPacket(fxpExtendedReply, 7, str(string(append(append(str(me.Username), str(me.Username)...), str("")...))), str(""))
		if a := answers[7]; !bytes.Equal(a, want[4:]) {
			t.Errorf("users-groups-by-id answered %q, want %q", a, want[4:])
		}
	}
	// limits as sshd's sftp-server gives them, but open handles: packet,
	// read and write lengths, and the server's bound on handles.
	wantLimits := binary.BigEndian.AppendUint32([]byte{fxpExtendedReply}, 3)
	for _, n := range []uint64{256 << 10, 255 << 10, 255 << 10, sftp.MaxOpenHandles} {
		wantLimits = binary.BigEndian.AppendUint64(wantLimits, n)
	}
	if a := answers[3]; !bytes.Equal(a, wantLimits) {
		t.Errorf("limits answered %x, want %x", a, wantLimits)
	}
	if a := answers[8]; a == nil || a[0] != fxpStatus || binary.BigEndian.Uint32(a[5:]) != fxBadMessage {
		t.Errorf("users-groups-by-id of 3 bytes of uids: %q, want a bad message", a)
	}
}

// A client that sends a request right behind INIT, without waiting for
// VERSION, gets both answers: the request waits for pkg/sftp's VERSION,
// which goes out rewritten, and must be woken by it.
func TestSFTPCompatRequestBehindInit(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	srv, err := sftp.NewServer(newSFTPCompat(a, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve() }()
	defer func() { _ = srv.Close(); <-done }()
	initPkt := []byte{0, 0, 0, 5, 1, 0, 0, 0, 3}
	go func() { _, _ = b.Write(append(initPkt, rawPacket(fxpRealpath, 7, str("."))...)) }()
	_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
	for _, want := range []byte{fxpVersion, fxpName} {
		hdr := make([]byte, 4)
		if _, err := io.ReadFull(b, hdr); err != nil {
			t.Fatalf("waiting for packet type %d: %v", want, err)
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr))
		if _, err := io.ReadFull(b, body); err != nil {
			t.Fatal(err)
		}
		if body[0] != want {
			t.Fatalf("packet type %d, want %d", body[0], want)
		}
	}
}
