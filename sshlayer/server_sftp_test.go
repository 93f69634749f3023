//go:build linux

package sshlayer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/providertest"
	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

func TestServerSFTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := srvStartServer(t, &ServerConfig{Dir: dir})
	c := srvDialServer(t, ts)
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sc.Close() }()
	wd, err := sc.Getwd()
	if err != nil || wd != dir {
		t.Errorf("sftp working directory %q %v, want %q", wd, err, dir)
	}
	data := make([]byte, 5<<20+123)
	_, _ = rand.Read(data)
	f, err := sc.Create("a.bin") // relative: lands in Dir
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFrom(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sc.Rename("a.bin", "b.bin"); err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, "b.bin"))
	if err != nil || !bytes.Equal(onDisk, data) {
		t.Fatalf("file on disk: %d bytes, %v; want the %d written", len(onDisk), err, len(data))
	}
	entries, err := sc.ReadDir(".")
	if err != nil || len(entries) != 1 || entries[0].Name() != "b.bin" || entries[0].Size() != int64(len(data)) {
		t.Fatalf("readdir: %v %v", entries, err)
	}
	rf, err := sc.Open("b.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rf.Close() }()
	var got bytes.Buffer
	if _, err := io.Copy(&got, rf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatal("read back differs")
	}
}

// TestServerSFTPConformance runs the provider suite through hostgate's
// client against this server's SFTP subsystem, with pkg/sftp allocating
// each request's buffers and with SFTPReuseBuffers.
func TestServerSFTPConformance(t *testing.T) {
	for _, reuse := range []bool{false, true} {
		t.Run(map[bool]string{false: "allocating", true: "reusing buffers"}[reuse], func(t *testing.T) {
			t.Parallel()
			c := connectEmbedded(t, srvStartServer(t, &ServerConfig{SFTPReuseBuffers: reuse}))
			providertest.Run(t, func(t *testing.T) (hostgate.Provider, string) {
				p, err := c.SFTP(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				return p, t.TempDir()
			})
		})
	}
}

// TestServerSFTPFullDisk: a write that the host's disk refuses (/dev/full
// answers every write ENOSPC, as a sandbox's full workspace does) is
// errors.Is(err, syscall.ENOSPC) through the provider's stream and its
// whole-file write, not only a Failure whose text says so: SFTP v3 has
// no status for it.
func TestServerSFTPFullDisk(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	c := connectEmbedded(t, srvStartServer(t, &ServerConfig{}))
	ctx := context.Background()
	p, err := c.SFTP(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A stream's writes go out without waiting for their answers: the
	// refusal is the Write's that waits for one (past sftpConcurrency in
	// flight), and Close's.
	w, err := p.Create(ctx, "/dev/full", 0o666)
	if err != nil {
		t.Fatal(err)
	}
	var werr error
	for i := 0; i <= sftpConcurrency && werr == nil; i++ {
		_, werr = w.Write(make([]byte, 4096))
	}
	cerr := w.Close()
	for what, err := range map[string]error{"Write": werr, "Close": cerr} {
		if !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("%s to a full disk: %v, want ENOSPC", what, err)
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Path != "/dev/full" {
			t.Errorf("%s to a full disk: %#v, want a *fs.PathError naming the file", what, err)
		}
	}
	w, err = p.Create(ctx, "/dev/full", 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 4096)); err != nil {
		t.Errorf("one Write to a full disk: %v, want nil (its answer not waited for)", err)
	}
	if err := w.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Close after one Write to a full disk: %v, want ENOSPC", err)
	}
	err = p.(hostgate.FileWriter).WriteFile(ctx, "/dev/full", 0o666, bytes.NewReader(make([]byte, 1<<20)), nil)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("WriteFile to a full disk: %v, want ENOSPC", err)
	}
}

// A stream's Seek moves where its next write or read goes, though its
// writes go out ahead of their answers and its first read got the file's
// start ahead; a write after a Seek, or a WriteAt, lands after those sent
// ahead, which a server may run in any order.
func TestServerSFTPStreamSeek(t *testing.T) {
	t.Parallel()
	c := connectEmbedded(t, srvStartServer(t, &ServerConfig{}))
	ctx := context.Background()
	p, err := c.SFTP(ctx)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(t.TempDir(), "f")
	w, err := p.Create(ctx, name, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	ws := w.(io.WriteSeeker)
	if _, err := io.WriteString(ws, "hello, world"); err != nil {
		t.Fatal(err)
	}
	if off, err := ws.Seek(0, io.SeekCurrent); err != nil || off != 12 {
		t.Fatalf("Seek(0, current) after 12 bytes: %d, %v", off, err)
	}
	if _, err := ws.Seek(-12, io.SeekCurrent); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(ws, "J"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.(io.WriterAt).WriteAt([]byte("W"), 7); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(name); err != nil || string(b) != "Jello, World" {
		t.Fatalf("the file: %q, %v; want the seek's and WriteAt's writes over the first's", b, err)
	}
	r, err := p.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rs := r.(io.ReadSeeker)
	b := make([]byte, 5)
	if _, err := io.ReadFull(rs, b); err != nil || string(b) != "Jello" {
		t.Fatalf("first 5 bytes: %q, %v", b, err)
	}
	if off, err := rs.Seek(0, io.SeekCurrent); err != nil || off != 5 {
		t.Fatalf("Seek(0, current) after 5 bytes read: %d, %v", off, err)
	}
	if _, err := rs.Seek(7, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(rs); err != nil || string(rest) != "World" {
		t.Fatalf("after Seek(7): %q, %v", rest, err)
	}
}

// TestServerSFTPOpenFIFO: an SFTP open of a FIFO that nothing has open at
// its other end is answered at once: for reading with a handle, for
// writing with ENXIO's failure. The server opened it as os.OpenFile does,
// which waits in open(2) for the other end: the request was never
// answered, and its worker held an OS thread and the session past the
// client's end, so the server's Close waited without end (and every such
// request took a thread, which the Go runtime allows 10000 of).
func TestServerSFTPOpenFIFO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	c := srvDialServer(t, srvStartServer(t, &ServerConfig{Dir: dir}))
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sc.Close() }()
	for _, tc := range []struct {
		flag   int
		opens  bool
		doWhat string
	}{{os.O_RDONLY, true, "reading"}, {os.O_WRONLY, false, "writing"}} {
		done := make(chan error, 1)
		go func() {
			f, err := sc.OpenFile("fifo", tc.flag)
			if err == nil {
				_ = f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if (err == nil) != tc.opens {
				t.Errorf("SFTP open of a FIFO for %s with nothing at its other end: %v, want it to open: %v", tc.doWhat, err, tc.opens)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("SFTP open of a FIFO for %s with nothing at its other end: no answer in 10 s", tc.doWhat)
			// Its other end lets the server's open, and the test, end.
			other, err := os.OpenFile(fifo, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			<-done
			_ = other.Close()
		}
	}
}

// A copy-data that would run for ever (2^62 bytes from /dev/zero to
// /dev/null) ends with its session: once the client's channel closes the
// copy stops, and the server's Close (the agent's shutdown) returns. It
// is tried alone and behind requests that keep the session's receive
// loop from reading (the dispatcher's queue full of STATs waiting for the
// one sequential worker the copy holds; 70 READs answered and held
// behind the copy's reply, past the session's 64 request slots), where
// the end of the channel cannot reach it through a read.
//
// Not parallel: it looks for the copy's goroutine in the whole process.
func TestServerSFTPCopyDataEndsWithSession(t *testing.T) {
	for _, tc := range []struct {
		name   string
		behind byte // 0, fxpStat or fxpRead: 70 of them after the copy
	}{{"alone", 0}, {"behind stats", 17}, {"behind reads", 5}} {
		t.Run(tc.name, func(t *testing.T) {
			ts, err := StartTestServerConfig(&ServerConfig{Dir: t.TempDir(), SFTPReuseBuffers: true})
			if err != nil {
				t.Fatal(err)
			}
			c, err := srvDialWith(ts.Addr, ts.HostPublicKey, ssh.PublicKeys(ts.ClientSigner))
			if err != nil {
				t.Fatal(err)
			}
			ch, reqs, err := c.OpenChannel("session", nil)
			if err != nil {
				t.Fatal(err)
			}
			go ssh.DiscardRequests(reqs)
			if ok, err := ch.SendRequest("subsystem", true, ssh.Marshal(struct{ Name string }{"sftp"})); !ok || err != nil {
				t.Fatalf("subsystem sftp: %v %v", ok, err)
			}
			send := func(b []byte) {
				t.Helper()
				if _, err := ch.Write(b); err != nil {
					t.Fatal(err)
				}
			}
			recv := func() []byte {
				t.Helper()
				hdr := make([]byte, 4)
				if _, err := io.ReadFull(ch, hdr); err != nil {
					t.Fatal(err)
				}
				b := make([]byte, binary.BigEndian.Uint32(hdr))
				if _, err := io.ReadFull(ch, b); err != nil {
					t.Fatal(err)
				}
				return b
			}
			u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
			u64 := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
			open := func(id uint32, name string, pflags uint32) []byte {
				t.Helper()
				send(rawPacket(3, id, str(name), u32(pflags), u32(0)))
				b := recv()
				if b[0] != 102 {
					t.Fatalf("open %s: answer of type %d, want a handle", name, b[0])
				}
				h, _, ok := sftpString(b[5:])
				if !ok {
					t.Fatalf("open %s: malformed handle", name)
				}
				return str(h)
			}
			send(rawPacket(1, 3)) // INIT, version 3
			if b := recv(); b[0] != fxpVersion {
				t.Fatalf("init: answer of type %d", b[0])
			}
			zero := open(1, "/dev/zero", 1)
			null := open(2, "/dev/null", 2)
			send(rawPacket(fxpExtended, 3, str("copy-data"), zero, u64(0), u64(1<<62), null, u64(0)))
			for i := range uint32(70) {
				switch tc.behind {
				case 17:
					send(rawPacket(17, 10+i, str("/")))
				case 5:
					send(rawPacket(5, 10+i, zero, u64(0), u32(32<<10)))
				}
			}
			if !waitCopying(true, 10*time.Second) {
				t.Fatal("the copy never ran")
			}

			_ = ch.Close()
			if !waitCopying(false, 10*time.Second) {
				t.Error("the copy still runs 10 s after its channel closed")
			}
			_ = c.Close()
			closed := make(chan error, 1)
			go func() { closed <- ts.Close() }()
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("the server's Close has not returned 10 s after the client went")
			}
		})
	}
}

// waitCopying waits up to d for a copy-data of pkg/sftp's server to be
// running (or, for false, for none to be), and reports whether it came.
func waitCopying(want bool, d time.Duration) bool {
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(d); ; {
		n := runtime.Stack(buf, true)
		for n == len(buf) {
			buf = make([]byte, 2*len(buf))
			n = runtime.Stack(buf, true)
		}
		if bytes.Contains(buf[:n], []byte("sftp.(*sshFxpExtendedPacketCopyData).respond")) == want {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
