//go:build unix

package sshlayer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/localexec"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/providertest"
)

const sftpServerBin = "/usr/lib/openssh/sftp-server"

// startSFTPServer runs OpenSSH's sftp-server as a child process speaking
// SFTP over its stdin and stdout: a real peer in another process.
func startSFTPServer(tb testing.TB) *sftp.Client {
	tb.Helper()
	return startSFTPServerAs(tb, nil)
}

// startSFTPServerAs runs sftp-server as cred's user (nil: as this process);
// opts go after SFTPClientOptions, so they can override them.
func startSFTPServerAs(tb testing.TB, cred *syscall.Credential, opts ...sftp.ClientOption) *sftp.Client {
	tb.Helper()
	_, err := os.Stat(sftpServerBin)
	testenv.RequirePeer(tb, "OpenSSH sftp-server", err == nil)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, sftpServerBin, "-e", "-l", "ERROR")
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = testLogWriter{tb}
	cmd.WaitDelay = 10 * time.Second
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	c, err := sftp.NewClientPipe(out, in, append(SFTPClientOptions(), opts...)...)
	if err != nil {
		cancel()
		_ = cmd.Wait()
		tb.Fatalf("sftp handshake: %v", err)
	}
	tb.Cleanup(func() {
		_ = c.Close() // closes stdin: sftp-server exits on EOF
		if err := cmd.Wait(); err != nil {
			tb.Errorf("sftp-server: %v", err)
		}
		cancel()
	})
	return c
}

type testLogWriter struct{ tb testing.TB }

func (w testLogWriter) Write(b []byte) (int, error) {
	w.tb.Logf("sftp-server: %s", b)
	return len(b), nil
}

func TestSFTPProviderConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T) (hostgate.Provider, string) {
		return NewSFTPProvider(startSFTPServer(t)), t.TempDir()
	})
}

// TestSFTPProviderConformanceUnprivileged runs the suite against an
// sftp-server running as nobody, so the permission cases are checked.
func TestSFTPProviderConformanceUnprivileged(t *testing.T) {
	testenv.RequirePeer(t, "root (to switch to nobody)", os.Geteuid() == 0)
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	providertest.Run(t, func(t *testing.T) (hostgate.Provider, string) {
		dir, err := os.MkdirTemp("", "hostgate-nobody-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = filepath.WalkDir(dir, func(p string, _ fs.DirEntry, _ error) error {
				_ = os.Chmod(p, 0o755) // undo a failed test's locks
				return nil
			})
			if err := os.RemoveAll(dir); err != nil {
				t.Error(err)
			}
		})
		if err := os.Chown(dir, int(nobody.Uid), int(nobody.Gid)); err != nil {
			t.Fatal(err)
		}
		return NewSFTPProvider(startSFTPServerAs(t, nobody)), dir
	})
}

// TestSSHDProviderConformance runs the suite over a real SSH connection to
// OpenSSH sshd, for both providers: SFTP (sshd's sftp subsystem) and
// ExecProvider (one exec channel per operation).
func TestSSHDProviderConformance(t *testing.T) {
	s := startSSHD(t, sshdOptions{LogLevel: "ERROR"})
	c := s.connect(t, nil)
	// Both run at once over the one connection: SSH multiplexes them, and
	// the two 256 MiB transfers overlap instead of adding up.
	t.Run("sftp", func(t *testing.T) {
		t.Parallel()
		providertest.Run(t, func(t *testing.T) (hostgate.Provider, string) {
			p, err := c.SFTP(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return p, t.TempDir()
		})
	})
	t.Run("exec", func(t *testing.T) {
		t.Parallel()
		providertest.Run(t, func(t *testing.T) (hostgate.Provider, string) {
			return hostgate.ExecProvider(c), t.TempDir()
		})
	})
}

// TestSFTPProviderCtxCancelClosesStream: cancelling the ctx given to Open
// or Create ends the stream, so an abandoned transfer releases its handle.
// A read or write right after the cancel fails with the ctx's error (it
// once raced the AfterFunc that closes the file, and lost under load).
func TestSFTPProviderCtxCancelClosesStream(t *testing.T) {
	p := NewSFTPProvider(startSFTPServer(t))
	name := t.TempDir() + "/f"
	if err := os.WriteFile(name, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, err := p.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := io.ReadAll(r); !errors.Is(err, context.Canceled) {
		t.Errorf("read after cancel: %v, want context.Canceled", err)
	}
	if _, err := io.Copy(io.Discard, r); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteTo after cancel: %v, want context.Canceled", err)
	}
	_ = r.Close()
	if _, err := p.Open(ctx, name); err == nil {
		t.Errorf("Open with a cancelled ctx succeeded")
	}

	ctx, cancel = context.WithCancel(context.Background())
	w, err := p.Create(ctx, name+".new", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := w.Write([]byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("write after cancel: %v, want context.Canceled", err)
	}
	if _, err := w.(io.ReaderFrom).ReadFrom(strings.NewReader("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadFrom after cancel: %v, want context.Canceled", err)
	}
	if err := w.Close(); err == nil {
		t.Errorf("Close after cancel: no error")
	}
}

const benchSize = 64 << 20

// benchNames are the providers the throughput benchmarks compare in one
// run: SFTP against a sftp-server child process and ExecProvider over local
// os/exec (no network, no crypto), then both over SSH to OpenSSH sshd.
var benchNames = []string{"sftp-server", "exec-local", "sshd-sftp", "sshd-exec"}

func benchProvider(b *testing.B, name string) hostgate.Provider {
	switch name {
	case "sftp-server":
		return NewSFTPProvider(startSFTPServer(b))
	case "exec-local":
		return hostgate.ExecProvider(&localexec.Transport{})
	}
	s := startSSHD(b, sshdOptions{LogLevel: "ERROR"})
	c := s.connect(b, nil)
	if name == "sshd-exec" {
		return hostgate.ExecProvider(c)
	}
	p, err := c.SFTP(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func BenchmarkProviderUpload(b *testing.B) {
	dir := b.TempDir()
	for _, name := range benchNames {
		b.Run(name, func(b *testing.B) {
			p := benchProvider(b, name)
			ctx := context.Background()
			b.SetBytes(benchSize)
			for b.Loop() {
				w, err := p.Create(ctx, dir+"/up", 0o644)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(w, io.LimitReader(providertest.NewGenerator(1), benchSize)); err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkProviderDownload(b *testing.B) {
	dir := b.TempDir()
	f, err := os.Create(dir + "/down")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(f, io.LimitReader(providertest.NewGenerator(2), benchSize)); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	for _, name := range benchNames {
		b.Run(name, func(b *testing.B) {
			p := benchProvider(b, name)
			ctx := context.Background()
			b.SetBytes(benchSize)
			for b.Loop() {
				r, err := p.Open(ctx, dir+"/down")
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, r)
				if err != nil || n != benchSize {
					b.Fatalf("read %d: %v", n, err)
				}
				_ = r.Close()
			}
		})
	}
}

var _ io.ReaderFrom = (*sftpWriter)(nil)
var _ io.WriterTo = (*sftpReader)(nil)

// BenchmarkProviderStat is the per-operation cost: one SFTP round trip
// against one spawned shell (and, over SSH, one exec channel) per call.
func BenchmarkProviderStat(b *testing.B) {
	dir := b.TempDir()
	for _, name := range benchNames {
		b.Run(name, func(b *testing.B) {
			p := benchProvider(b, name)
			ctx := context.Background()
			for b.Loop() {
				if _, err := p.Stat(ctx, dir); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A provider over a client with a smaller packet than hostgate's (any
// *sftp.Client may be handed to NewSFTPProvider; pkg/sftp's default is
// 32 KiB) writes whole files intact: WriteFile filled 255 KiB chunks,
// and each pipelined write sent only the client's packet of them.
func TestSFTPProviderWriteFileSmallPackets(t *testing.T) {
	c := startSFTPServerAs(t, nil, sftp.MaxPacket(32<<10))
	p := NewSFTPProvider(c)
	fw, ok := p.(hostgate.FileWriter)
	if !ok {
		t.Fatal("the SFTP provider is no FileWriter")
	}
	want := make([]byte, 1<<20+123)
	for i := range want {
		want[i] = byte(i * 7)
	}
	name := filepath.Join(t.TempDir(), "f")
	if err := fw.WriteFile(testCtx(t), name, 0o644, bytes.NewReader(want), nil); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("wrote %d bytes through 32 KiB packets, read back %d, equal %v", len(want), len(got), bytes.Equal(got, want))
	}
}

// silentSFTPServer is an SFTP server that answers the handshake and then
// nothing: a host that stopped (a stopped agent, a network gone quiet).
func silentSFTPServer(t *testing.T) *sftp.Client {
	t.Helper()
	cr, sw := io.Pipe() // server to client
	// Client to server over TCP, whose buffers take the requests a
	// writer sends ahead of their answers, as an SSH channel's window
	// does: through a pipe, the writes a Create sends without waiting
	// would wait for the server to read them.
	sr, cw := testenv.TCPPair(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var hdr [4]byte
		if _, err := io.ReadFull(sr, hdr[:]); err != nil {
			return
		}
		n := int64(hdr[0])<<24 | int64(hdr[1])<<16 | int64(hdr[2])<<8 | int64(hdr[3])
		if _, err := io.CopyN(io.Discard, sr, n); err != nil {
			return
		}
		_, _ = sw.Write([]byte{0, 0, 0, 5, 2, 0, 0, 0, 3}) // SSH_FXP_VERSION 3
		_, _ = io.Copy(io.Discard, sr)
	}()
	c, err := sftp.NewClientPipe(cr, cw, SFTPClientOptions()...)
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

// TestSFTPProviderCtxEndsWaitOnSilentHost: each call returns ctx's error
// once ctx ends, though the host never answers; they used to wait for the
// connection to end (a stopped agent: over 20 s past a 2 s deadline for
// Stat and Open; found by the audit31 audit).
func TestSFTPProviderCtxEndsWaitOnSilentHost(t *testing.T) {
	p := NewSFTPProvider(silentSFTPServer(t))
	// One that offers lsetstat@openssh.com, then says nothing.
	lp := newSFTPProvider(silentSFTPServer(t), nil)
	lp.lsetstat = true
	calls := map[string]func(ctx context.Context) error{
		"Stat":    func(ctx context.Context) error { _, err := p.Stat(ctx, "/a"); return err },
		"Lstat":   func(ctx context.Context) error { _, err := p.Lstat(ctx, "/a"); return err },
		"ReadDir": func(ctx context.Context) error { _, err := p.ReadDir(ctx, "/a"); return err },
		"Open":    func(ctx context.Context) error { _, err := p.Open(ctx, "/a"); return err },
		"Create":  func(ctx context.Context) error { _, err := p.Create(ctx, "/a", 0o644); return err },
		"WriteFile": func(ctx context.Context) error {
			return p.(hostgate.FileWriter).WriteFile(ctx, "/a", 0o644, strings.NewReader("a"), nil)
		},
		"Mkdir":    func(ctx context.Context) error { return p.Mkdir(ctx, "/a/b", 0o755, true) },
		"Remove":   func(ctx context.Context) error { return p.Remove(ctx, "/a", true) },
		"Rename":   func(ctx context.Context) error { return p.Rename(ctx, "/a", "/b") },
		"Symlink":  func(ctx context.Context) error { return p.Symlink(ctx, "/a", "/b") },
		"Readlink": func(ctx context.Context) error { _, err := p.Readlink(ctx, "/a"); return err },
		"Realpath": func(ctx context.Context) error { _, err := p.Realpath(ctx, "/a"); return err },
		"Chmod":    func(ctx context.Context) error { return p.Chmod(ctx, "/a", 0o600) },
		"Chtimes": func(ctx context.Context) error {
			return p.(hostgate.TimeSetter).Chtimes(ctx, "/a", time.Unix(1e9, 0), time.Unix(1e9, 0))
		},
		"Lchtimes": func(ctx context.Context) error {
			return lp.Lchtimes(ctx, "/a", time.Unix(1e9, 0), time.Unix(1e9, 0))
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- call(ctx) }()
			select {
			case err := <-done:
				var pe *fs.PathError
				var le *hostgate.LinkError
				if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &pe) && !errors.As(err, &le) {
					t.Fatalf("%s on a silent host: %v, want ctx's error naming the path", name, err)
				}
			case <-time.After(time.Minute): // a guard against a hang, not a timing
				t.Fatalf("%s on a silent host: still waiting a minute after its ctx ended", name)
			}
		})
	}
}

// gate passes a server's bytes on to its client but, while frozen, holds
// them (a host stopped with SIGSTOP, a network gone quiet) until thaw.
type gate struct {
	mu     sync.Mutex
	cond   *sync.Cond
	frozen bool
	held   int // chunks held while frozen
}

func newGate() *gate {
	g := &gate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *gate) freeze() { g.set(true) }
func (g *gate) thaw()   { g.set(false) }

func (g *gate) set(frozen bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if frozen && !g.frozen {
		g.held = 0
	}
	g.frozen = frozen
	g.cond.Broadcast()
}

// holding reports whether a reply is held.
func (g *gate) holding() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held > 0
}

func (g *gate) pass(r io.Reader, w io.WriteCloser) {
	defer w.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			g.mu.Lock()
			if g.frozen {
				g.held++
			}
			for g.frozen {
				g.cond.Wait()
			}
			g.mu.Unlock()
			if _, err := w.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// gatedSFTPServer is pkg/sftp's server on this machine's files, its replies
// passed through a gate.
func gatedSFTPServer(t *testing.T) (*sftp.Client, *gate) {
	t.Helper()
	g := newGate()
	cr, gw := io.Pipe() // gate to client
	gr, sw := io.Pipe() // server to gate
	// Client to server over TCP, whose buffers take the requests a
	// writer sends ahead of their answers, as an SSH channel's window
	// does: through a pipe, the writes a Create sends without waiting
	// would wait for the server to read them.
	sr, cw := testenv.TCPPair(t)
	go g.pass(gr, gw)
	srv, err := sftp.NewServer(struct {
		io.Reader
		io.WriteCloser
	}{sr, sw})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve()
		_ = sw.Close()
	}()
	c, err := sftp.NewClientPipe(cr, cw, SFTPClientOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.thaw()
		_ = c.Close()
		<-served
		_ = srv.Close()
	})
	return c, g
}

// TestSFTPProviderStreamCtxEndsOnStoppedHost: a stream's call waiting for
// a host that stopped answering (Read and WriteTo of a reader, Write and
// ReadFrom of a writer) returns ctx's error once ctx ends, and the
// connection's other calls work once the host answers again. They used to
// wait until the host answered: the ctx's AfterFunc closed the file, and
// the close waited for its reply behind the reads' (a stopped agent:
// still waiting 20 s past a 2 s deadline; found by the audit31 audit).
func TestSFTPProviderStreamCtxEndsOnStoppedHost(t *testing.T) {
	c, g := gatedSFTPServer(t)
	p := NewSFTPProvider(c)
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	bg := context.Background()

	open := func(ctx context.Context) (io.Reader, io.Closer) {
		r, err := p.Open(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return r, r
	}
	create := func(ctx context.Context) (io.Writer, io.Closer) {
		w, err := p.Create(ctx, filepath.Join(dir, "g"), 0o644)
		if err != nil {
			t.Fatal(err)
		}
		return w, w
	}
	calls := []struct {
		name string
		call func(ctx context.Context) (func() error, io.Closer)
	}{
		{"Read", func(ctx context.Context) (func() error, io.Closer) {
			r, cl := open(ctx)
			return func() error { _, err := r.Read(make([]byte, 1000)); return err }, cl
		}},
		{"WriteTo", func(ctx context.Context) (func() error, io.Closer) {
			r, cl := open(ctx)
			return func() error { _, err := r.(io.WriterTo).WriteTo(io.Discard); return err }, cl
		}},
		// Writes go out without waiting for their answers: the Write
		// that waits is the one past sftpConcurrency in flight.
		{"Write", func(ctx context.Context) (func() error, io.Closer) {
			w, cl := create(ctx)
			return func() error {
				for {
					if _, err := w.Write(make([]byte, 1000)); err != nil {
						return err
					}
				}
			}, cl
		}},
		{"ReadFrom", func(ctx context.Context) (func() error, io.Closer) {
			w, cl := create(ctx)
			return func() error { _, err := w.(io.ReaderFrom).ReadFrom(bytes.NewReader(data)); return err }, cl
		}},
		// A reader's Close returns nil, as after ctx's end; a writer's
		// says that what it wrote may not all be there.
		{"reader Close", func(ctx context.Context) (func() error, io.Closer) {
			_, cl := open(ctx)
			return cl.Close, io.NopCloser(nil)
		}},
		{"writer Close", func(ctx context.Context) (func() error, io.Closer) {
			_, cl := create(ctx)
			return cl.Close, io.NopCloser(nil)
		}},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			call, cl := tc.call(ctx)
			g.freeze()
			defer g.thaw() // on a failure too
			done := make(chan error, 1)
			go func() { done <- call() }()
			for !g.holding() {
				time.Sleep(time.Millisecond)
			}
			cancel()
			select {
			case err := <-done:
				var pe *fs.PathError
				if tc.name == "reader Close" {
					if err != nil {
						t.Errorf("%s on a stopped host, its ctx cancelled: %v; want nil", tc.name, err)
					}
				} else if !errors.Is(err, context.Canceled) || !errors.As(err, &pe) || pe.Path != name && pe.Path != filepath.Join(dir, "g") {
					t.Errorf("%s on a stopped host, its ctx cancelled: %v; want ctx's error naming the path", tc.name, err)
				}
				if pe != nil && errors.As(pe.Err, new(*fs.PathError)) {
					t.Errorf("%s: %v: the path twice", tc.name, err)
				}
			case <-time.After(20 * time.Second): // a guard against a hang, not a timing
				t.Fatalf("%s on a stopped host: still waiting 20 s after its ctx was cancelled", tc.name)
			}
			_ = cl.Close()
			g.thaw()
			// The host answers again: the late replies are dropped and
			// the connection goes on.
			fi, err := p.Stat(bg, name)
			if err != nil || fi.Size() != int64(len(data)) {
				t.Fatalf("Stat after: %v, %v", fi, err)
			}
			r, err := p.Open(bg, name)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if _, err := io.Copy(&got, r); err != nil || !bytes.Equal(got.Bytes(), data) {
				t.Errorf("a download after: %v, same bytes %v", err, bytes.Equal(got.Bytes(), data))
			}
			if err := r.Close(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestSFTPProviderStreamEndsOnCtxBeforeAbort: a stream's reads and writes
// fail with ctx's error as soon as ctx is done, before the abort that
// ctx's end starts has run (held back here). Without the streams' own
// check, a call in between still read or wrote the host's file.
func TestSFTPProviderStreamEndsOnCtxBeforeAbort(t *testing.T) {
	p := newSFTPProvider(startSFTPServer(t), nil)
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	p.holdAbort = func() { <-release }
	name := t.TempDir() + "/f"
	if err := os.WriteFile(name, []byte("the host's bytes"), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	r, err := p.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if n, err := r.Read(make([]byte, 64)); !errors.Is(err, context.Canceled) {
		t.Errorf("read after cancel, the abort held back: %d bytes, %v; want context.Canceled", n, err)
	}
	if n, err := r.(io.WriterTo).WriteTo(io.Discard); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteTo after cancel, the abort held back: %d bytes, %v; want context.Canceled", n, err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	w, err := p.Create(ctx, name+".new", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if n, err := w.Write([]byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("write after cancel, the abort held back: %d bytes, %v; want context.Canceled", n, err)
	}
	if n, err := w.(io.ReaderFrom).ReadFrom(strings.NewReader("y")); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadFrom after cancel, the abort held back: %d bytes, %v; want context.Canceled", n, err)
	}
	free()
	_ = r.Close()
	_ = w.Close()
	if b, err := os.ReadFile(name + ".new"); err != nil || len(b) != 0 {
		t.Errorf("the file created: %q, %v; want it empty (nothing written after cancel)", b, err)
	}
}

// TestSFTPProviderLchtimes: over OpenSSH's sftp-server, which offers
// lsetstat@openssh.com, Lchtimes sets a symbolic link's own time and not
// its target's; a server that does not offer it is ErrNotSupported, said
// without a request (the silent server would never answer one).
func TestSFTPProviderLchtimes(t *testing.T) {
	p := NewSFTPProvider(startSFTPServer(t)).(hostgate.TimeSetter)
	dir := t.TempDir()
	file, link := filepath.Join(dir, "file"), filepath.Join(dir, "link")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("file", link); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2005, 6, 7, 8, 9, 10, 0, time.UTC)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Lchtimes(ctx, link, want, want); err != nil {
		t.Fatalf("Lchtimes through OpenSSH's sftp-server: %v", err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.ModTime().Unix() != want.Unix() {
		t.Errorf("the link's own mtime after Lchtimes: %v (%v), want %v", fi.ModTime().UTC(), err, want)
	}
	if fi, err := os.Stat(file); err != nil || !fi.ModTime().Equal(before.ModTime()) {
		t.Errorf("the link's target's mtime moved to %v (%v) from %v", fi.ModTime().UTC(), err, before.ModTime().UTC())
	}

	silent := NewSFTPProvider(silentSFTPServer(t)).(hostgate.TimeSetter)
	if err := silent.Lchtimes(ctx, "/a", want, want); !errors.Is(err, hostgate.ErrNotSupported) {
		t.Errorf("Lchtimes on a server without lsetstat@openssh.com: %v, want ErrNotSupported", err)
	}
}
