//go:build unix

package sshlayer

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
)

// SFTP v3 packet types the scripted server below reads and answers.
const (
	fxpInit     = 1
	fxpOpen     = 3
	fxpClose    = 4
	fxpLstat    = 7
	fxpOpendir  = 11
	fxpStat     = 17
	fxpReadlink = 19
	fxpHandle   = 102
	fxpAttrs    = 105
)

// scriptedSFTPServer is a host whose SFTP server answers each request as
// answer says: the reply's body after the id (its type first), or nil to
// leave the request unanswered for good (a host that stalls).
func scriptedSFTPServer(t *testing.T, answer func(typ byte, payload []byte) []byte) *sftp.Client {
	t.Helper()
	return scriptedSFTPServerOffering(t, nil, answer)
}

// scriptedSFTPServerOffering is scriptedSFTPServer whose VERSION offers
// the extensions exts (their data "1"); the requests of theirs come to
// answer as fxpExtended.
func scriptedSFTPServerOffering(t *testing.T, exts []string, answer func(typ byte, payload []byte) []byte) *sftp.Client {
	t.Helper()
	return scriptedSFTPServerVia(t, exts, nil, answer)
}

// scriptedSFTPServerVia is scriptedSFTPServerOffering whose client writes
// through wrap(w) (nil: w).
func scriptedSFTPServerVia(t *testing.T, exts []string, wrap func(w io.WriteCloser) io.WriteCloser, answer func(typ byte, payload []byte) []byte) *sftp.Client {
	t.Helper()
	version := []byte{fxpVersion, 0, 0, 0, 3}
	for _, ext := range exts {
		version = append(version, wireString(ext)...)
		version = append(version, wireString("1")...)
	}
	version = append(binary.BigEndian.AppendUint32(nil, uint32(len(version))), version...)
	cr, sw := io.Pipe() // server to client
	sr, cw := testenv.TCPPair(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			var hdr [4]byte
			if _, err := io.ReadFull(sr, hdr[:]); err != nil {
				return
			}
			pkt := make([]byte, binary.BigEndian.Uint32(hdr[:]))
			if _, err := io.ReadFull(sr, pkt); err != nil || len(pkt) < 5 {
				return
			}
			if pkt[0] == fxpInit {
				_, _ = sw.Write(version) // SSH_FXP_VERSION 3
				continue
			}
			reply := answer(pkt[0], pkt[5:])
			if reply == nil {
				continue
			}
			out := binary.BigEndian.AppendUint32(nil, uint32(len(reply)+4))
			out = append(out, reply[0])
			out = append(out, pkt[1:5]...) // the request's id
			out = append(out, reply[1:]...)
			if _, err := sw.Write(out); err != nil {
				return
			}
		}
	}()
	var w io.WriteCloser = cw
	if wrap != nil {
		w = wrap(cw)
	}
	c, err := sftp.NewClientPipe(cr, w, SFTPClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sw.Close()
		_ = c.Close()
		_ = sr.Close()
		<-done
	})
	return c
}

// wireString is s as SFTP sends a string.
func wireString(s string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(s))), s...)
}

// sftpStatusReply is a STATUS reply's body with code.
func sftpStatusReply(code uint32, msg string) []byte {
	b := binary.BigEndian.AppendUint32([]byte{fxpStatus}, code)
	b = append(b, wireString(msg)...)
	return append(b, wireString("")...)
}

// sftpModeReply is an ATTRS reply's body with only a mode.
func sftpModeReply(mode uint32) []byte {
	b := binary.BigEndian.AppendUint32([]byte{fxpAttrs}, 0x4) // permissions
	return binary.BigEndian.AppendUint32(b, mode)
}

// returnsByCtx runs call with a ctx that ends in 100 ms and returns its
// error, failing the test when call is still waiting for the host 10 s
// later.
func returnsByCtx(t *testing.T, what string, call func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second): // a guard against a hang, not a timing
		t.Fatalf("%s: still waiting for a stalled host 10 s after its ctx ended", what)
		return nil
	}
}

// TestSFTPProviderReadDirFailureCtx: a ReadDir the host failed asks a
// Stat to tell ENOTDIR; a host that never answers that Stat keeps the
// caller no longer than its ctx.
func TestSFTPProviderReadDirFailureCtx(t *testing.T) {
	p := NewSFTPProvider(scriptedSFTPServer(t, func(typ byte, _ []byte) []byte {
		if typ == fxpOpendir {
			return sftpStatusReply(4, "failure") // SSH_FX_FAILURE
		}
		return nil
	}))
	err := returnsByCtx(t, "ReadDir whose Stat the host never answers", func(ctx context.Context) error {
		_, err := p.ReadDir(ctx, "/d/f")
		return err
	})
	var se *sftp.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("ReadDir: %v, want the host's failure", err)
	}
}

// TestSFTPProviderLookupReadlinkCtx: a Stat the host said "no such file"
// of looks around for ENOTDIR or ELOOP, down to a Readlink of a symlink it
// meets; a host that never answers that Readlink keeps the caller no
// longer than its ctx.
func TestSFTPProviderLookupReadlinkCtx(t *testing.T) {
	p := NewSFTPProvider(scriptedSFTPServer(t, func(typ byte, payload []byte) []byte {
		name := string(payload[4:])
		switch {
		case typ == fxpStat && name == "/d/l":
			return sftpStatusReply(2, "no such file") // SSH_FX_NO_SUCH_FILE
		case typ == fxpStat && name == "/d":
			return sftpModeReply(0o040755)
		case typ == fxpLstat && name == "/d/l":
			return sftpModeReply(0o120777)
		}
		return nil // READLINK, and anything else
	}))
	err := returnsByCtx(t, "Stat whose lookup's Readlink the host never answers", func(ctx context.Context) error {
		_, err := p.Stat(ctx, "/d/l")
		return err
	})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat: %v, want the host's no such file", err)
	}
}

// TestSFTPProviderReadFileOpenCtx: a ReadFile whose OPEN the host does
// not answer waits no longer than its ctx, and says so naming the path;
// the handle the host answers with later is closed.
func TestSFTPProviderReadFileOpenCtx(t *testing.T) {
	gaveUp := make(chan struct{})
	closed := make(chan struct{}, 1)
	p := NewSFTPProvider(scriptedSFTPServer(t, func(typ byte, payload []byte) []byte {
		switch typ {
		case fxpOpen:
			<-gaveUp
			return append([]byte{fxpHandle}, wireString("h")...)
		case fxpClose:
			if string(payload) == string(wireString("h")) {
				closed <- struct{}{}
			}
			return sftpStatusReply(0, "")
		}
		return nil
	}))
	var once sync.Once
	giveUp := func() { once.Do(func() { close(gaveUp) }) }
	t.Cleanup(giveUp) // before the server's: its answer waits for it
	err := returnsByCtx(t, "ReadFile whose open the host does not answer", func(ctx context.Context) error {
		_, err := p.(hostgate.FileReader).ReadFile(ctx, "/a", nil)
		return err
	})
	giveUp()
	var pe *fs.PathError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &pe) {
		t.Fatalf("ReadFile: %v, want ctx's error naming the path", err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the handle answered after ReadFile gave up was not closed")
	}
}

// TestSFTPProviderLimitsUnansweredCtx: a host that offers
// limits@openssh.com and never answers it keeps the provider's reads and
// writes, which size their requests by its limits, no longer than their
// ctx (pkg/sftp change 27). Before, each waited until the connection
// ended.
func TestSFTPProviderLimitsUnansweredCtx(t *testing.T) {
	p := NewSFTPProvider(scriptedSFTPServerOffering(t, []string{"limits@openssh.com"}, func(typ byte, _ []byte) []byte {
		switch typ {
		case fxpOpen:
			return append([]byte{fxpHandle}, wireString("h")...)
		case fxpLstat:
			return sftpModeReply(0o100644)
		case fxpClose:
			return sftpStatusReply(0, "")
		}
		return nil // the limits, and the handle's reads and fstats
	}))
	for _, tc := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"ReadFile", func(ctx context.Context) error {
			_, err := p.(hostgate.FileReader).ReadFile(ctx, "/a", nil)
			return err
		}},
		{"Open+Read", func(ctx context.Context) error {
			r, err := p.Open(ctx, "/a")
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = r.Read(make([]byte, 10))
			return err
		}},
		{"Create+Write", func(ctx context.Context) error {
			w, err := p.Create(ctx, "/a", 0o644)
			if err != nil {
				return err
			}
			defer w.Close()
			_, err = w.Write([]byte("data"))
			return err
		}},
		{"WriteFile", func(ctx context.Context) error {
			return p.(hostgate.FileWriter).WriteFile(ctx, "/a", 0o644, strings.NewReader("data"), nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := returnsByCtx(t, tc.name+" against unanswered limits", tc.call)
			var pe *fs.PathError
			if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &pe) || pe.Path != "/a" {
				t.Fatalf("%s: %v, want ctx's error naming the path", tc.name, err)
			}
		})
	}
}

// TestSFTPProviderWriteFileTailCtx: WriteFile's requests after its writes
// (the new file's fstat when the lstat sent with the create did not see
// it, the mode's fsetstat, the close) wait no longer than its ctx when
// the host answers everything but them.
func TestSFTPProviderWriteFileTailCtx(t *testing.T) {
	const (
		fxpFstat    = 8
		fxpWrite    = 6
		fxpFsetstat = 10
	)
	for _, tc := range []struct {
		name   string
		lstat  []byte // the answer to the lstat sent with the create
		silent byte   // the request left unanswered
	}{
		// The server took the lstat before the create: the handle's
		// fstat is asked.
		{name: "fstat", lstat: sftpStatusReply(2, "no such file"), silent: fxpFstat},
		// Created 0664 under umask 002: mode 0644 is set.
		{name: "fsetstat", lstat: sftpModeReply(0o100664), silent: fxpFsetstat},
		{name: "close", lstat: sftpModeReply(0o100644), silent: fxpClose},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewSFTPProvider(scriptedSFTPServer(t, func(typ byte, _ []byte) []byte {
				switch {
				case typ == tc.silent:
					return nil
				case typ == fxpOpen:
					return append([]byte{fxpHandle}, wireString("h")...)
				case typ == fxpLstat:
					return tc.lstat
				case typ == fxpFstat:
					return sftpModeReply(0o100644)
				case typ == fxpWrite, typ == fxpFsetstat, typ == fxpClose:
					return sftpStatusReply(0, "")
				}
				return nil
			}))
			err := returnsByCtx(t, "WriteFile whose "+tc.name+" the host never answers", func(ctx context.Context) error {
				return p.(hostgate.FileWriter).WriteFile(ctx, "/a", 0o644, strings.NewReader("data"), nil)
			})
			var pe *fs.PathError
			if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &pe) || pe.Path != "/a" {
				t.Fatalf("WriteFile: %v, want ctx's error naming the path", err)
			}
		})
	}
}

// TestSFTPProviderReadDirCloseCtx: a ReadDir whose listing the host
// answered and whose close it never answers returns the listing once
// its ctx ends (pkg/sftp change 28), the close's answer being of no
// consequence.
func TestSFTPProviderReadDirCloseCtx(t *testing.T) {
	const fxpReaddir = 12
	listed := false
	p := NewSFTPProvider(scriptedSFTPServer(t, func(typ byte, _ []byte) []byte {
		switch typ {
		case fxpOpendir:
			return append([]byte{fxpHandle}, wireString("d")...)
		case fxpReaddir:
			if listed {
				return sftpStatusReply(1, "") // SSH_FX_EOF
			}
			listed = true
			b := binary.BigEndian.AppendUint32([]byte{fxpName}, 1)
			b = append(b, wireString("f")...)
			b = append(b, wireString("-rw-r--r-- f")...)
			return append(b, sftpModeReply(0o100644)[1:]...)
		}
		return nil // the close
	}))
	var ents []fs.DirEntry
	err := returnsByCtx(t, "ReadDir whose close the host never answers", func(ctx context.Context) error {
		var err error
		ents, err = p.ReadDir(ctx, "/d")
		return err
	})
	if err != nil || len(ents) != 1 || ents[0].Name() != "f" {
		t.Fatalf("ReadDir: %v, %v; want the host's listing (f)", ents, err)
	}
}

// gateWriter passes the client's writes on until hold, and then keeps
// each waiting until release, as an SSH channel whose window the host no
// longer opens (it stopped reading); WriteContext's wait ends with its
// ctx, as that of hostgate's x/crypto channel does (its change 16).
type gateWriter struct {
	w io.WriteCloser

	mu      sync.Mutex
	held    chan struct{} // closed by release; nil: passing
	waiting chan struct{} // closed when a write first waits
	once    sync.Once
}

func newGateWriter(w io.WriteCloser) *gateWriter {
	return &gateWriter{w: w, waiting: make(chan struct{})}
}

func (g *gateWriter) hold() {
	g.mu.Lock()
	if g.held == nil {
		g.held = make(chan struct{})
	}
	g.mu.Unlock()
}

func (g *gateWriter) release() {
	g.mu.Lock()
	if g.held != nil {
		close(g.held)
		g.held = nil
	}
	g.mu.Unlock()
}

func (g *gateWriter) Write(p []byte) (int, error) {
	return g.WriteContext(context.Background(), p)
}

func (g *gateWriter) WriteContext(ctx context.Context, p []byte) (int, error) {
	g.mu.Lock()
	held := g.held
	g.mu.Unlock()
	if held != nil {
		g.once.Do(func() { close(g.waiting) })
		select {
		case <-held:
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		}
	}
	return g.w.Write(p)
}

func (g *gateWriter) Close() error {
	g.release()
	return g.w.Close()
}

// windowSFTPServer is scriptedSFTPServer answering what the provider's
// calls below ask, its client writing through a gateWriter, released
// before the server's cleanup.
func windowSFTPServer(t *testing.T, onOpen func(g *gateWriter)) (*sftp.Client, *gateWriter) {
	const (
		fxpFstat   = 8
		fxpWrite   = 6
		fxpRead    = 5
		fxpReaddir = 12
	)
	var g *gateWriter
	c := scriptedSFTPServerVia(t, nil, func(w io.WriteCloser) io.WriteCloser {
		g = newGateWriter(w)
		return g
	}, func(typ byte, _ []byte) []byte {
		switch typ {
		case fxpOpen, fxpOpendir:
			if onOpen != nil {
				onOpen(g)
			}
			return append([]byte{fxpHandle}, wireString("h")...)
		case fxpStat, fxpLstat, fxpFstat:
			return sftpModeReply(0o100644)
		case fxpRead, fxpReaddir:
			return sftpStatusReply(1, "") // SSH_FX_EOF
		case fxpWrite, fxpClose:
			return sftpStatusReply(0, "")
		}
		return nil
	})
	t.Cleanup(g.release) // before the server's: the client's Close waits for the send lock
	return c, g
}

// TestSFTPProviderCallsBehindStalledSend: while a request of the session
// waits to be sent on a window the host does not open (it stopped
// reading), holding the session's send lock, the provider's calls with
// a ctx of 100 ms return ctx's error naming the path, and a reader's
// Close returns at once (pkg/sftp change 29). Before, each waited for the
// lock until the connection ended. Once the host reads again the session
// answers.
func TestSFTPProviderCallsBehindStalledSend(t *testing.T) {
	c, g := windowSFTPServer(t, nil)
	p := NewSFTPProvider(c)
	r, err := p.Open(context.Background(), "/r")
	if err != nil {
		t.Fatal(err)
	}
	g.hold()
	held := make(chan error, 1)
	go func() { _, err := c.Stat("/held"); held <- err }() // no ctx: waits on the window
	<-g.waiting

	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("reader's Close: %v", err)
		}
	case <-time.After(10 * time.Second): // a guard against a hang, not a timing
		t.Fatal("a reader's Close still waited 10 s for a send the host does not read")
	}
	for _, tc := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Stat", func(ctx context.Context) error { _, err := p.Stat(ctx, "/a"); return err }},
		{"Lstat", func(ctx context.Context) error { _, err := p.Lstat(ctx, "/a"); return err }},
		{"ReadDir", func(ctx context.Context) error { _, err := p.ReadDir(ctx, "/a"); return err }},
		{"ReadFile", func(ctx context.Context) error {
			_, err := p.(hostgate.FileReader).ReadFile(ctx, "/a", nil)
			return err
		}},
		{"WriteFile", func(ctx context.Context) error {
			return p.(hostgate.FileWriter).WriteFile(ctx, "/a", 0o644, strings.NewReader("data"), nil)
		}},
		{"Create", func(ctx context.Context) error {
			w, err := p.Create(ctx, "/a", 0o644)
			if err == nil {
				_ = w.Close()
			}
			return err
		}},
	} {
		err := returnsByCtx(t, tc.name+" behind a stalled send", tc.call)
		var pe *fs.PathError
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &pe) || pe.Path != "/a" {
			t.Errorf("%s behind a stalled send: %v, want ctx's error naming the path", tc.name, err)
		}
	}

	g.release() // the host reads again
	if err := <-held; err != nil {
		t.Fatalf("the Stat that held the send: %v", err)
	}
	if _, err := p.Stat(context.Background(), "/b"); err != nil {
		t.Fatalf("the session after the calls that gave up: %v", err)
	}
}

// TestSFTPProviderReadFileSendCtx: a ReadFile whose handle's first
// requests wait to be sent on a window the host stopped opening once it
// answered the open returns ctx's error naming the path; before, its
// fstat waited for the window until the connection ended.
func TestSFTPProviderReadFileSendCtx(t *testing.T) {
	c, _ := windowSFTPServer(t, func(g *gateWriter) { g.hold() })
	p := NewSFTPProvider(c)
	err := returnsByCtx(t, "ReadFile whose reads wait on the window", func(ctx context.Context) error {
		_, err := p.(hostgate.FileReader).ReadFile(ctx, "/a", nil)
		return err
	})
	var pe *fs.PathError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &pe) || pe.Path != "/a" {
		t.Fatalf("ReadFile: %v, want ctx's error naming the path", err)
	}
}
