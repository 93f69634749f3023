package hostgate_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
)

// errLinkDown is what every part of the failing connection fails with:
// as given (a transport that does not name its host), or inside an error
// that names the host already (as the SSH client's lost connection does).
var errLinkDown = errors.New("link down")

const failName = "fail" // the path, argv[0] or address of a call that fails at once

// failingConn is a connection whose every operation fails with cause: at
// the call for failName, else at the first use of what the call returns
// (a process, a file's reader or writer, a conn, a listener).
func failingConn(name string, cause error) *hostgate.Connection {
	return &hostgate.Connection{
		Name:      name,
		Transport: failingTransport{cause},
		FS:        failingProvider{cause},
		Forward:   failingForwarder{cause},
		Close:     func() error { return nil },
	}
}

// failingHost is a Host over failingConn(name, cause), closed with t.
func failingHost(t *testing.T, name string, cause error) *hostgate.Host {
	h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
		return failingConn(name, cause), nil
	})
	t.Cleanup(func() { _ = h.Close() })
	return h
}

type failingTransport struct{ cause error }

func (t failingTransport) Spawn(ctx context.Context, argv []string, opts hostgate.SpawnOptions) (hostgate.Process, error) {
	if argv[0] == failName {
		return nil, fmt.Errorf("spawn: %w", t.cause)
	}
	return failingProcess(t), nil
}

type failingProcess struct{ cause error }

func (p failingProcess) Stdin() io.WriteCloser       { return failing(p) }
func (p failingProcess) Stdout() io.Reader           { return failing(p) }
func (p failingProcess) Stderr() io.Reader           { return failing(p) }
func (p failingProcess) Wait() error                 { return p.cause }
func (p failingProcess) Kill(hostgate.Signal) error  { return p.cause }
func (p failingProcess) Resize(cols, rows int) error { return p.cause }

// failing is a stream, a file's reader or writer, a conn and a listener
// whose every method fails with cause.
type failing struct{ cause error }

func (f failing) Read([]byte) (int, error)          { return 0, f.cause }
func (f failing) WriteTo(io.Writer) (int64, error)  { return 0, f.cause }
func (f failing) Write([]byte) (int, error)         { return 0, f.cause }
func (f failing) ReadFrom(io.Reader) (int64, error) { return 0, f.cause }
func (f failing) Close() error                      { return f.cause }
func (f failing) CloseWrite() error                 { return f.cause }
func (f failing) Accept() (net.Conn, error)         { return nil, f.cause }
func (f failing) Addr() net.Addr                    { return nil }
func (f failing) LocalAddr() net.Addr               { return nil }
func (f failing) RemoteAddr() net.Addr              { return nil }
func (f failing) SetDeadline(time.Time) error       { return nil }
func (f failing) SetReadDeadline(time.Time) error   { return nil }
func (f failing) SetWriteDeadline(time.Time) error  { return nil }

type failingProvider struct{ cause error }

var (
	_ hostgate.FileReader = failingProvider{}
	_ hostgate.FileWriter = failingProvider{}
)

func (p failingProvider) err(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: p.cause}
}

func (p failingProvider) linkErr(op, oldname, newname string) error {
	return &hostgate.LinkError{Op: op, Old: oldname, New: newname, Err: p.cause}
}

func (p failingProvider) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	return nil, p.err("stat", name)
}

func (p failingProvider) Lstat(ctx context.Context, name string) (fs.FileInfo, error) {
	return nil, p.err("lstat", name)
}

func (p failingProvider) ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	return nil, p.err("readdir", name)
}

func (p failingProvider) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	if name == failName {
		return nil, p.err("open", name)
	}
	return failing(p), nil
}

func (p failingProvider) Create(ctx context.Context, name string, perm fs.FileMode) (io.WriteCloser, error) {
	if name == failName {
		return nil, p.err("create", name)
	}
	return failing(p), nil
}

func (p failingProvider) Mkdir(ctx context.Context, name string, perm fs.FileMode, parents bool) error {
	return p.err("mkdir", name)
}

func (p failingProvider) Remove(ctx context.Context, name string, recursive bool) error {
	return p.err("remove", name)
}

func (p failingProvider) Rename(ctx context.Context, oldname, newname string) error {
	return p.linkErr("rename", oldname, newname)
}

func (p failingProvider) Symlink(ctx context.Context, oldname, newname string) error {
	return p.linkErr("symlink", oldname, newname)
}

func (p failingProvider) Readlink(ctx context.Context, name string) (string, error) {
	return "", p.err("readlink", name)
}

func (p failingProvider) Realpath(ctx context.Context, name string) (string, error) {
	return "", p.err("realpath", name)
}

func (p failingProvider) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	return p.err("chmod", name)
}

func (p failingProvider) ReadFile(ctx context.Context, name string, progress func()) ([]byte, error) {
	return nil, p.err("open", name)
}

func (p failingProvider) WriteFile(ctx context.Context, name string, perm fs.FileMode, r io.Reader, progress func()) error {
	return p.err("create", name)
}

type failingForwarder struct{ cause error }

var _ hostgate.EarlyDialer = failingForwarder{}

func (f failingForwarder) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if addr == failName+":1" {
		return nil, &net.OpError{Op: "dial", Net: network, Err: f.cause}
	}
	return failing(f), nil
}

func (f failingForwarder) DialEarly(ctx context.Context, network, addr string) (net.Conn, error) {
	return f.Dial(ctx, network, addr)
}

func (f failingForwarder) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	if addr == failName+":1" {
		return nil, fmt.Errorf("listen: %w", f.cause)
	}
	return failing(f), nil
}

// hostCall is one method of the Host API, or of what it hands out, called
// so that it fails.
type hostCall struct {
	name string
	call func(ctx context.Context, h *hostgate.Host) error
}

func fsCall(name string, call func(ctx context.Context, p hostgate.Provider) error) hostCall {
	return hostCall{"FS." + name, func(ctx context.Context, h *hostgate.Host) error {
		p, err := h.FS(ctx)
		if err != nil {
			return err
		}
		return call(ctx, p)
	}}
}

func processCall(name string, call func(p hostgate.Process) error) hostCall {
	return hostCall{"Process." + name, func(ctx context.Context, h *hostgate.Host) error {
		p, err := h.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{})
		if err != nil {
			return err
		}
		return call(p)
	}}
}

func connCall(name string, call func(c net.Conn) error) hostCall {
	return hostCall{"Conn." + name, func(ctx context.Context, h *hostgate.Host) error {
		c, err := h.Dial(ctx, "tcp", "ok:1")
		if err != nil {
			return err
		}
		return call(c)
	}}
}

func forwarderCall(name string, call func(ctx context.Context, f hostgate.Forwarder) error) hostCall {
	return hostCall{"Forwarder." + name, func(ctx context.Context, h *hostgate.Host) error {
		f, err := h.Forwarder(ctx)
		if err != nil {
			return err
		}
		return call(ctx, f)
	}}
}

func second[T any](_ T, err error) error { return err }

// hostCalls is every method of the Host API that reaches the connection,
// and every method of the provider, processes, conns and listeners it
// hands out.
var hostCalls = []hostCall{
	{"Spawn", func(ctx context.Context, h *hostgate.Host) error {
		return second(h.Spawn(ctx, []string{failName}, hostgate.SpawnOptions{}))
	}},
	{"Exec", func(ctx context.Context, h *hostgate.Host) error {
		return second(h.Exec(ctx, []string{failName}, hostgate.ExecOptions{}))
	}},
	{"Exec.Wait", func(ctx context.Context, h *hostgate.Host) error {
		return second(h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}))
	}},
	processCall("Wait", func(p hostgate.Process) error { return p.Wait() }),
	processCall("Kill", func(p hostgate.Process) error { return p.Kill(hostgate.SIGTERM) }),
	processCall("Resize", func(p hostgate.Process) error { return p.(hostgate.Resizer).Resize(80, 24) }),
	processCall("Stdin.Write", func(p hostgate.Process) error { return second(p.Stdin().Write([]byte("x"))) }),
	processCall("Stdin.Close", func(p hostgate.Process) error { return p.Stdin().Close() }),
	processCall("Stdout.Read", func(p hostgate.Process) error { return second(p.Stdout().Read(make([]byte, 1))) }),
	processCall("Stderr.Read", func(p hostgate.Process) error { return second(p.Stderr().Read(make([]byte, 1))) }),
	fsCall("Stat", func(ctx context.Context, p hostgate.Provider) error { return second(p.Stat(ctx, "/a")) }),
	fsCall("Lstat", func(ctx context.Context, p hostgate.Provider) error { return second(p.Lstat(ctx, "/a")) }),
	fsCall("ReadDir", func(ctx context.Context, p hostgate.Provider) error { return second(p.ReadDir(ctx, "/a")) }),
	fsCall("Open", func(ctx context.Context, p hostgate.Provider) error { return second(p.Open(ctx, failName)) }),
	fsCall("Open.Read", func(ctx context.Context, p hostgate.Provider) error {
		r, err := p.Open(ctx, "/a")
		if err != nil {
			return err
		}
		return second(r.Read(make([]byte, 1)))
	}),
	fsCall("Open.WriteTo", func(ctx context.Context, p hostgate.Provider) error {
		r, err := p.Open(ctx, "/a")
		if err != nil {
			return err
		}
		return second(r.(io.WriterTo).WriteTo(io.Discard))
	}),
	fsCall("Open.Close", func(ctx context.Context, p hostgate.Provider) error {
		r, err := p.Open(ctx, "/a")
		if err != nil {
			return err
		}
		return r.Close()
	}),
	fsCall("Create", func(ctx context.Context, p hostgate.Provider) error { return second(p.Create(ctx, failName, 0o644)) }),
	fsCall("Create.Write", func(ctx context.Context, p hostgate.Provider) error {
		w, err := p.Create(ctx, "/a", 0o644)
		if err != nil {
			return err
		}
		return second(w.Write([]byte("x")))
	}),
	fsCall("Create.ReadFrom", func(ctx context.Context, p hostgate.Provider) error {
		w, err := p.Create(ctx, "/a", 0o644)
		if err != nil {
			return err
		}
		return second(w.(io.ReaderFrom).ReadFrom(strings.NewReader("x")))
	}),
	fsCall("Create.Close", func(ctx context.Context, p hostgate.Provider) error {
		w, err := p.Create(ctx, "/a", 0o644)
		if err != nil {
			return err
		}
		return w.Close()
	}),
	fsCall("Mkdir", func(ctx context.Context, p hostgate.Provider) error { return p.Mkdir(ctx, "/a", 0o755, true) }),
	fsCall("Remove", func(ctx context.Context, p hostgate.Provider) error { return p.Remove(ctx, "/a", false) }),
	fsCall("Rename", func(ctx context.Context, p hostgate.Provider) error { return p.Rename(ctx, "/a", "/b") }),
	fsCall("Symlink", func(ctx context.Context, p hostgate.Provider) error { return p.Symlink(ctx, "/a", "/b") }),
	fsCall("Readlink", func(ctx context.Context, p hostgate.Provider) error { return second(p.Readlink(ctx, "/a")) }),
	fsCall("Realpath", func(ctx context.Context, p hostgate.Provider) error { return second(p.Realpath(ctx, "/a")) }),
	fsCall("Chmod", func(ctx context.Context, p hostgate.Provider) error { return p.Chmod(ctx, "/a", 0o600) }),
	fsCall("ReadFile", func(ctx context.Context, p hostgate.Provider) error {
		return second(p.(hostgate.FileReader).ReadFile(ctx, "/a", nil))
	}),
	fsCall("WriteFile", func(ctx context.Context, p hostgate.Provider) error {
		return p.(hostgate.FileWriter).WriteFile(ctx, "/a", 0o644, strings.NewReader("x"), nil)
	}),
	{"Dial", func(ctx context.Context, h *hostgate.Host) error { return second(h.Dial(ctx, "tcp", failName+":1")) }},
	{"DialEarly", func(ctx context.Context, h *hostgate.Host) error {
		return second(h.DialEarly(ctx, "tcp", failName+":1"))
	}},
	connCall("Read", func(c net.Conn) error { return second(c.Read(make([]byte, 1))) }),
	connCall("Write", func(c net.Conn) error { return second(c.Write([]byte("x"))) }),
	connCall("Close", func(c net.Conn) error { return c.Close() }),
	connCall("CloseWrite", func(c net.Conn) error { return c.(interface{ CloseWrite() error }).CloseWrite() }),
	{"DialEarly.Read", func(ctx context.Context, h *hostgate.Host) error {
		c, err := h.DialEarly(ctx, "tcp", "ok:1")
		if err != nil {
			return err
		}
		return second(c.Read(make([]byte, 1)))
	}},
	{"Listen", func(ctx context.Context, h *hostgate.Host) error { return second(h.Listen(ctx, "tcp", failName+":1")) }},
	{"Listen.Accept", func(ctx context.Context, h *hostgate.Host) error {
		ln, err := h.Listen(ctx, "tcp", "ok:1")
		if err != nil {
			return err
		}
		return second(ln.Accept())
	}},
	{"Listen.Close", func(ctx context.Context, h *hostgate.Host) error {
		ln, err := h.Listen(ctx, "tcp", "ok:1")
		if err != nil {
			return err
		}
		return ln.Close()
	}},
	forwarderCall("Dial", func(ctx context.Context, f hostgate.Forwarder) error {
		return second(f.Dial(ctx, "tcp", failName+":1"))
	}),
	forwarderCall("DialEarly", func(ctx context.Context, f hostgate.Forwarder) error {
		return second(f.(hostgate.EarlyDialer).DialEarly(ctx, "tcp", failName+":1"))
	}),
	forwarderCall("Dial.Read", func(ctx context.Context, f hostgate.Forwarder) error {
		c, err := f.Dial(ctx, "tcp", "ok:1")
		if err != nil {
			return err
		}
		return second(c.Read(make([]byte, 1)))
	}),
	forwarderCall("Listen", func(ctx context.Context, f hostgate.Forwarder) error {
		return second(f.Listen(ctx, "tcp", failName+":1"))
	}),
	forwarderCall("Listen.Accept", func(ctx context.Context, f hostgate.Forwarder) error {
		ln, err := f.Listen(ctx, "tcp", "ok:1")
		if err != nil {
			return err
		}
		return second(ln.Accept())
	}),
	{"Forward", func(ctx context.Context, h *hostgate.Host) error {
		return second(h.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardRemote, Listen: failName + ":1", Connect: "127.0.0.1:1"}))
	}},
}

// TestHostErrorsNameTheHost calls every method of the Host API, of its
// provider and of what they hand out, on a connection that fails each,
// and checks that the error names the host exactly once, whether the
// connection's error named it already or not, and still matches what it
// wraps. Before, only a lost SSH connection's errors named the host: a
// caller of 50 hosts could not tell which one a failed stat was on.
func TestHostErrorsNameTheHost(t *testing.T) {
	const name = "build-01"
	causes := map[string]error{
		"plain":        errLinkDown,
		"named before": fmt.Errorf("host %s: connection lost: %w", name, errLinkDown),
	}
	hosts := map[string]func(c *hostgate.Connection) *hostgate.Host{
		"host": func(c *hostgate.Connection) *hostgate.Host {
			return hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) { return c, nil })
		},
		"wrapped": func(c *hostgate.Connection) *hostgate.Host {
			base := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) { return c, nil })
			t.Cleanup(func() { _ = base.Close() })
			return hostgate.Wrap(base, func(argv []string, _ string, env map[string]string) ([]string, map[string]string) {
				return argv, env
			})
		},
		// The name given before connecting names what the connection
		// hands out when the connection has none of its own.
		"NewNamed": func(c *hostgate.Connection) *hostgate.Host {
			unnamed := *c
			unnamed.Name = ""
			return hostgate.NewNamed(name, hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) { return &unnamed, nil })
		},
	}
	for causeName, cause := range causes {
		for hostName, newHost := range hosts {
			t.Run(causeName+"/"+hostName, func(t *testing.T) {
				ctx := t.Context()
				h := newHost(failingConn(name, cause))
				t.Cleanup(func() { _ = h.Close() })
				for _, c := range hostCalls {
					err := c.call(ctx, h)
					if err == nil {
						t.Errorf("%s: no error", c.name)
						continue
					}
					if n := strings.Count(err.Error(), "host "+name+":"); n != 1 {
						t.Errorf("%s: %q names the host %d times, want once", c.name, err, n)
					}
					// First, where a caller reads it: the lost
					// connection's name came after the op's words.
					if !strings.HasPrefix(err.Error(), "host "+name+": ") {
						t.Errorf("%s: %q does not start with the host's name", c.name, err)
					}
					if !errors.Is(err, errLinkDown) {
						t.Errorf("%s: %q does not match the connection's error", c.name, err)
					}
				}
			})
		}
	}
}

// TestHostErrorsKeepTheirType checks what callers of os and io/fs test
// for: a path error stays a *fs.PathError (os.IsNotExist holds, Path is the
// file's) with the host before its op, a link error a *LinkError, a dial's
// *net.OpError is still found by errors.As, and io.EOF and a process's
// exit status are not errors of the host's and stay as they are.
func TestHostErrorsKeepTheirType(t *testing.T) {
	ctx := t.Context()
	h := failingHost(t, "build-01", fs.ErrNotExist)
	p, err := h.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}

	_, err = p.Stat(ctx, "/etc/x")
	pe, ok := err.(*fs.PathError)
	if !ok || pe.Path != "/etc/x" || !os.IsNotExist(err) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Stat: %#v: want a *fs.PathError for /etc/x that os.IsNotExist", err)
	}
	if want := "host build-01: stat /etc/x: file does not exist"; err.Error() != want {
		t.Errorf("Stat: %q, want %q", err, want)
	}
	err = p.Rename(ctx, "/a", "/b")
	if le, ok := err.(*hostgate.LinkError); !ok || le.Old != "/a" || le.New != "/b" || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Rename: %#v: want a *hostgate.LinkError for /a /b matching fs.ErrNotExist", err)
	}

	_, err = h.Dial(ctx, "tcp", failName+":1")
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "dial" {
		t.Errorf("Dial: %#v: want a *net.OpError inside", err)
	}

	eofHost := failingHost(t, "build-01", io.EOF)
	c, err := eofHost.Dial(ctx, "tcp", "ok:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("Conn.Read at the end: %v, want io.EOF itself", err)
	}
	fsys, err := eofHost.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := fsys.Open(ctx, "/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("Open.Read at the end: %v, want io.EOF itself", err)
	}

	timeoutHost := failingHost(t, "build-01", os.ErrDeadlineExceeded)
	tc, err := timeoutHost.Dial(ctx, "tcp", "ok:1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tc.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("Conn.Read past its deadline: %#v, want a net.Error whose Timeout is true", err)
	}

	exit := &hostgate.ExitError{Code: 3}
	exitHost := failingHost(t, "build-01", exit)
	proc, err := exitHost.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Wait(); err != exit {
		t.Errorf("Wait: %v, want the *ExitError itself", err)
	}
}

// TestUnnamedConnectionErrorsUnchanged: a connection without a Name gets
// its errors back as it made them.
func TestUnnamedConnectionErrorsUnchanged(t *testing.T) {
	ctx := t.Context()
	h := failingHost(t, "", errLinkDown)
	for _, c := range hostCalls {
		if err := c.call(ctx, h); err == nil || strings.Contains(err.Error(), "host ") {
			t.Errorf("%s: %v, want the connection's error as it is", c.name, err)
		}
	}
}

// TestHostErrorsOfTheHostItselfNameIt: what the Host says itself (a
// capability missing, the host closed, a forward whose connection ended)
// names the host too, once it has connected.
func TestHostErrorsOfTheHostItselfNameIt(t *testing.T) {
	ctx := t.Context()
	ended := make(chan struct{})
	h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
		c := failingConn("build-01", errLinkDown)
		c.Forward = endsWithForwarder{c.Forward, ended}
		return c, nil
	})
	// The forwarder keeps Done, and is no EarlyDialer, as the one it names;
	// the failing one, with DialEarly and no Done, stays so too.
	f, err := h.Forwarder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, early := f.(hostgate.EarlyDialer)
	_, done := f.(interface{ Done() <-chan struct{} })
	if early || !done {
		t.Errorf("Forwarder %T: EarlyDialer %v, Done %v; want Done only, as the connection's", f, early, done)
	}
	f, err = failingHost(t, "build-01", errLinkDown).Forwarder(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, early = f.(hostgate.EarlyDialer)
	_, done = f.(interface{ Done() <-chan struct{} })
	if !early || done {
		t.Errorf("Forwarder %T: EarlyDialer %v, Done %v; want EarlyDialer only, as the connection's", f, early, done)
	}

	fw, err := h.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	close(ended)
	if err := fw.Err(); !errors.Is(err, hostgate.ErrConnectionEnded) || strings.Count(err.Error(), "host build-01:") != 1 {
		t.Errorf("Forwarding.Err: %v, want ErrConnectionEnded naming the host once", err)
	}
	if _, err := h.Sync(ctx); !errors.Is(err, hostgate.ErrNotSupported) || !strings.HasPrefix(err.Error(), "host build-01: ") {
		t.Errorf("Sync: %v, want ErrNotSupported naming the host", err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	for i, err := range useAll(ctx, h) {
		if !errors.Is(err, hostgate.ErrClosed) || !strings.HasPrefix(err.Error(), "host build-01: ") {
			t.Errorf("use %d after Close: %v, want ErrClosed naming the host", i, err)
		}
	}
	if _, err := h.Connection(ctx); !errors.Is(err, hostgate.ErrClosed) || !strings.HasPrefix(err.Error(), "host build-01: ") {
		t.Errorf("Connection after Close: %v, want ErrClosed naming the host", err)
	}
}

// endsWithForwarder is a Forwarder that knows when its connection ends, as
// the SSH client does.
type endsWithForwarder struct {
	hostgate.Forwarder
	done chan struct{}
}

func (f endsWithForwarder) Done() <-chan struct{} { return f.done }

// TestFirstConnectErrorsNameTheHost: a Host made with NewNamed names its
// host in the errors of a failing first connect, from every method, and
// of a use whose ctx ends while the connect goes on; a Wrap host over it
// too. A Host knew its name only from its connection, so the Go client's
// "context deadline exceeded" said nothing of which host timed out.
func TestFirstConnectErrorsNameTheHost(t *testing.T) {
	const name = "build-01"
	causes := map[string]error{
		"plain":        errLinkDown,
		"named before": fmt.Errorf("client: host %s: %w", name, errLinkDown),
	}
	wrap := func(base *hostgate.Host) *hostgate.Host {
		return hostgate.Wrap(base, func(argv []string, _ string, env map[string]string) ([]string, map[string]string) {
			return argv, env
		})
	}
	for causeName, cause := range causes {
		for _, wrapped := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/wrapped=%v", causeName, wrapped), func(t *testing.T) {
				ctx := t.Context()
				h := hostgate.NewNamed(name, hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) { return nil, cause })
				t.Cleanup(func() { _ = h.Close() })
				if wrapped {
					h = wrap(h)
					t.Cleanup(func() { _ = h.Close() })
				}
				if got := h.Name(); got != name {
					t.Errorf("Name before connecting: %q, want %q", got, name)
				}
				calls := append([]hostCall{{"Connection", func(ctx context.Context, h *hostgate.Host) error {
					return second(h.Connection(ctx))
				}}, {"Sync", func(ctx context.Context, h *hostgate.Host) error {
					return second(h.Sync(ctx))
				}}}, hostCalls...)
				for _, c := range calls {
					err := c.call(ctx, h)
					if err == nil {
						t.Errorf("%s: no error", c.name)
						continue
					}
					if n := strings.Count(err.Error(), name); n != 1 {
						t.Errorf("%s: %q names the host %d times, want once", c.name, err, n)
					}
					// The host's name says whose error it is: no
					// "hostgate: connect: " between it and the cause.
					if strings.Contains(err.Error(), "hostgate: ") {
						t.Errorf("%s: %q; want the connect's error after the host's name, without a prefix of the library's", c.name, err)
					}
					if !errors.Is(err, errLinkDown) {
						t.Errorf("%s: %q does not match the connect's error", c.name, err)
					}
				}
			})
		}
	}

	t.Run("ctx ends during the connect", func(t *testing.T) {
		release := make(chan struct{})
		h := hostgate.NewNamed(name, hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
			<-release
			return nil, errLinkDown
		})
		defer h.Close()
		defer close(release)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
		if !errors.Is(err, context.Canceled) || err.Error() != "host "+name+": connect: context canceled" {
			t.Errorf("Exec with ctx ended during the connect: %v, want context.Canceled naming the host and the connect", err)
		}
	})

	t.Run("the connection's name wins", func(t *testing.T) {
		h := hostgate.NewNamed("given", hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
			return failingConn(name, errLinkDown), nil
		})
		defer h.Close()
		_, err := h.Spawn(t.Context(), []string{failName}, hostgate.SpawnOptions{})
		if h.Name() != name || err == nil || !strings.HasPrefix(err.Error(), "host "+name+": ") || strings.Contains(err.Error(), "given") {
			t.Errorf("Name %q, Spawn %v; want the connection's name %q", h.Name(), err, name)
		}
	})

	t.Run("New names nothing before connecting", func(t *testing.T) {
		h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) { return nil, errLinkDown })
		defer h.Close()
		if _, err := h.Connection(t.Context()); err == nil || strings.Contains(err.Error(), "host ") {
			t.Errorf("Connection: %v, want the connect's error as it was", err)
		}
	})
}
