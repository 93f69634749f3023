package syncfs

import (
	"bytes"
	"context"
	"errors"
	"html/template"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"go.uber.org/goleak"

	"github.com/hostgate/hostgate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tree writes a small real tree — files, an empty file, nested
// directories, a symlink to a file and one to a directory — and returns its
// root and the files fstest must find.
func tree(t testing.TB) (string, []string) {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"hello.txt":             "hello, world\n",
		"empty":                 "",
		"dir/a.txt":             "a",
		"dir/sub/b.txt":         strings.Repeat("b", 100_000),
		"dir/with space.txt":    "space",
		"tmpl/page.tmpl":        `{{define "page"}}<p>{{.}}</p>{{end}}`,
		"tmpl/other.tmpl":       `{{define "other"}}other{{end}}`,
		"-leading dash":         "dash",
		"dir/sub/deeper/c.json": `{"c":1}`,
	}
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("hello.txt", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("dir/sub", filepath.Join(root, "dirlink")); err != nil {
		t.Fatal(err)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range files {
			if !yield(n) {
				return
			}
		}
	})
	return root, append(names, "link")
}

// open returns an FS over a fresh sftp-server child per connect, closed at
// cleanup (which must reap every child).
func open(t testing.TB, sv *server, root string, timeout time.Duration) *FS {
	t.Helper()
	fsys := New(sv.spec(), &Options{Root: root, Timeout: timeout})
	t.Cleanup(func() {
		if err := fsys.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		sv.mu.Lock()
		defer sv.mu.Unlock()
		for _, ch := range sv.children {
			if ch.cmd.ProcessState == nil {
				t.Errorf("sftp-server %d not reaped", ch.cmd.Process.Pid)
			}
		}
	})
	return fsys
}

func TestFSConformance(t *testing.T) {
	root, files := tree(t)
	fsys := open(t, newServer(t), root, 0)
	if err := fstest.TestFS(fsys, files...); err != nil {
		t.Fatal(err)
	}
}

// noSeek hides the SFTP file's Seek, so Seek reopens and skips.
type noSeek struct{ hostgate.Provider }

func (p noSeek) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	r, err := p.Provider.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return struct{ io.ReadCloser }{r}, nil
}

func TestFSConformanceWithoutSeek(t *testing.T) {
	root, files := tree(t)
	sv := newServer(t)
	sv.wrap = func(p hostgate.Provider) hostgate.Provider { return noSeek{p} }
	fsys := open(t, sv, root, 0)
	if err := fstest.TestFS(fsys, files...); err != nil {
		t.Fatal(err)
	}
}

func TestStdlib(t *testing.T) {
	root, _ := tree(t)
	sv := newServer(t)
	fsys := open(t, sv, root, 0)

	t.Run("root", func(t *testing.T) {
		// The provider names the root after the host directory; io/fs
		// calls it ".", as os.DirFS does.
		fi, err := fsys.Stat(".")
		if err != nil || fi.Name() != "." || !fi.IsDir() {
			t.Fatalf("Stat(.) = %v, %v", fi, err)
		}
	})

	t.Run("WalkDir", func(t *testing.T) {
		var got []string
		err := fs.WalkDir(fsys, "dir", func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			got = append(got, p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"dir", "dir/a.txt", "dir/sub", "dir/sub/b.txt", "dir/sub/deeper",
			"dir/sub/deeper/c.json", "dir/with space.txt"}
		if !slices.Equal(got, want) {
			t.Fatalf("walk = %q, want %q", got, want)
		}
	})

	t.Run("http.FS", func(t *testing.T) {
		srv := httptest.NewServer(http.FileServer(http.FS(fsys)))
		defer srv.Close()
		res, err := srv.Client().Get(srv.URL + "/dir/sub/b.txt")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK || string(body) != strings.Repeat("b", 100_000) {
			t.Fatalf("GET = %d, %d bytes", res.StatusCode, len(body))
		}
		// A range request makes the server seek.
		req, _ := http.NewRequest("GET", srv.URL+"/hello.txt", nil)
		req.Header.Set("Range", "bytes=7-11")
		res, err = srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusPartialContent || string(body) != "world" {
			t.Fatalf("range GET = %d %q", res.StatusCode, body)
		}
		res, err = srv.Client().Get(srv.URL + "/missing")
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Fatalf("GET missing = %d", res.StatusCode)
		}
	})

	t.Run("template.ParseFS", func(t *testing.T) {
		tm, err := template.ParseFS(fsys, "tmpl/*.tmpl")
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := tm.ExecuteTemplate(&b, "page", "<x>"); err != nil {
			t.Fatal(err)
		}
		if b.String() != "<p>&lt;x&gt;</p>" {
			t.Fatalf("page = %q", b.String())
		}
	})

	if n := sv.connects.Load(); n != 1 {
		t.Errorf("connects = %d, want 1", n)
	}
}

// TestStreamRandomChunks reads a 3 MiB file through Open with random read
// sizes (x/crypto's copyNRandomly idea) and random seeks.
func TestStreamRandomChunks(t *testing.T) {
	root := t.TempDir()
	data := make([]byte, 3<<20+17)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(filepath.Join(root, "big"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	fsys := open(t, newServer(t), root, 0)
	f, err := fsys.Open("big")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []byte
	for {
		buf := make([]byte, 1+rng.IntN(100_000))
		n, err := f.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, differ from the %d written", len(got), len(data))
	}
	sk := f.(io.Seeker)
	for range 20 {
		off := rng.Int64N(int64(len(data)))
		if _, err := sk.Seek(off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1000)
		n, err := io.ReadFull(f, buf)
		if err != nil && err != io.ErrUnexpectedEOF {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:n], data[off:off+int64(n)]) {
			t.Fatalf("at %d: wrong bytes", off)
		}
	}
}

func TestWrite(t *testing.T) {
	root := t.TempDir()
	fsys := open(t, newServer(t), root, 0)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fsys.MkdirAll("a/b/c", 0o750))
	must(fsys.MkdirAll("a/b/c", 0o750)) // exists: fine
	if fi, err := os.Stat(filepath.Join(root, "a/b/c")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
		t.Fatalf("mkdir: %v %v", fi, err)
	}
	big := bytes.Repeat([]byte("0123456789"), 100_000)
	must(fsys.WriteFile("a/b/c/f", big, 0o640))
	if got, err := os.ReadFile(filepath.Join(root, "a/b/c/f")); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("written file: %d bytes, %v", len(got), err)
	}
	must(fsys.WriteFile("a/b/c/f", []byte("short"), 0o640)) // truncates
	if got, _ := fsys.ReadFile("a/b/c/f"); string(got) != "short" {
		t.Fatalf("rewritten = %q", got)
	}
	must(fsys.Rename("a/b/c/f", "a/g"))
	if _, err := fsys.Stat("a/b/c/f"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat renamed-away file: %v", err)
	}
	must(fsys.Symlink("g", "a/link"))
	if target, err := fsys.ReadLink("a/link"); err != nil || target != "g" {
		t.Fatalf("readlink = %q, %v", target, err)
	}
	if fi, err := fsys.Lstat("a/link"); err != nil || fi.Mode().Type() != fs.ModeSymlink || fi.Name() != "link" {
		t.Fatalf("lstat link: %v %v", fi, err)
	}
	if got, _ := fsys.ReadFile("a/link"); string(got) != "short" {
		t.Fatalf("through link = %q", got)
	}
	err := fsys.Remove("a/b")
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Op != "remove" || pe.Path != "a/b" {
		t.Fatalf("remove non-empty dir: %v", err)
	}
	must(fsys.Remove("a/link"))
	must(fsys.RemoveAll("a"))
	must(fsys.RemoveAll("a")) // missing: fine, as os.RemoveAll
	if _, err := os.Lstat(filepath.Join(root, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after RemoveAll: %v", err)
	}
	if err := fsys.Remove("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("remove missing: %v", err)
	}
	if err := fsys.Rename("missing", "x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("rename missing: %v", err)
	} else if le := (*os.LinkError)(nil); !errors.As(err, &le) || le.Old != "missing" {
		t.Fatalf("rename error %T %v", err, err)
	}
	// It says why: a bare "invalid argument" left the caller to guess.
	if err := fsys.RemoveAll("."); !errors.Is(err, fs.ErrInvalid) || !strings.Contains(err.Error(), "Root ("+root+") cannot be removed") {
		t.Fatalf("RemoveAll(.) = %v; want fs.ErrInvalid saying the Root cannot be removed", err)
	}
}

func TestOpenFileNeverWritable(t *testing.T) {
	root, _ := tree(t)
	sv := newServer(t)
	fsys := open(t, sv, root, 0)
	for _, flag := range []int{os.O_WRONLY, os.O_RDWR, os.O_RDONLY | os.O_CREATE, os.O_RDONLY | os.O_APPEND, os.O_RDONLY | os.O_TRUNC} {
		f, err := fsys.OpenFile("hello.txt", flag, 0o644)
		if !errors.Is(err, syscall.ENOTSUP) || f != nil {
			t.Errorf("OpenFile(%#x) = %v, %v; want ENOTSUP", flag, f, err)
		}
	}
	f, err := fsys.OpenFile("hello.txt", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(io.Writer); ok {
		t.Error("an open file is an io.Writer")
	}
	b, err := io.ReadAll(f)
	if err != nil || string(b) != "hello, world\n" {
		t.Fatalf("read = %q, %v", b, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("second close = %v", err)
	}
	if sv.connects.Load() != 1 {
		t.Fatalf("connects = %d", sv.connects.Load())
	}
}

func TestInvalidNames(t *testing.T) {
	root, _ := tree(t)
	sv := newServer(t)
	fsys := open(t, sv, root, 0)
	for _, name := range []string{"/etc/passwd", "../x", "a/../b", "a/", "", "./a", `a\..\b`} {
		if !fs.ValidPath(name) {
			_, err := fsys.Stat(name)
			var pe *fs.PathError
			if !errors.Is(err, fs.ErrInvalid) || !errors.As(err, &pe) || pe.Path != name {
				t.Errorf("Stat(%q) = %v; want fs.ErrInvalid", name, err)
			}
			if err != nil && !strings.Contains(err.Error(), "relative to the FS's Root") {
				t.Errorf("Stat(%q) = %v; want what a valid name is said", name, err)
			}
			if err := fsys.WriteFile(name, nil, 0o600); !errors.Is(err, fs.ErrInvalid) {
				t.Errorf("WriteFile(%q) = %v", name, err)
			}
		}
	}
	if n := sv.connects.Load(); n != 0 {
		t.Errorf("invalid names connected %d times", n)
	}
}

// TestOneConnection: concurrent first calls share one connect, and the FS
// does not connect before its first call.
func TestOneConnection(t *testing.T) {
	root, _ := tree(t)
	sv := newServer(t)
	fsys := open(t, sv, root, 0)
	if sv.connects.Load() != 0 {
		t.Fatal("connected before the first call")
	}
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			for range 3 {
				b, err := fsys.ReadFile("hello.txt")
				if err != nil || string(b) != "hello, world\n" {
					t.Errorf("goroutine %d: %q, %v", i, b, err)
					return
				}
				if _, err := fsys.Stat("dir/sub/b.txt"); err != nil {
					t.Errorf("goroutine %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := sv.connects.Load(); n != 1 {
		t.Fatalf("connects = %d, want 1", n)
	}
}

// eventually runs a call that must succeed in a test with a short timeout.
// On a loaded machine a fresh connection may itself miss a 300 ms timeout: such a call is retried (each
// retry connects afresh), a bounded number of times. It returns how many
// connects the retries cost.
func eventually(t *testing.T, call func() error) int32 {
	t.Helper()
	for retries := range int32(10) {
		err := call()
		if err == nil {
			return retries
		}
		if !errors.Is(err, syscall.ETIMEDOUT) {
			t.Fatalf("after reconnect: %v", err)
		}
		t.Logf("retrying after %v", err)
	}
	t.Fatal("no call succeeded in 10 fresh connections")
	return 0
}

// TestKilledServer: a server that dies makes the call fail with a clear
// error (not a timeout, not a filesystem answer); the next call reconnects.
func TestKilledServer(t *testing.T) {
	root, _ := tree(t)
	sv := newServer(t)
	fsys := open(t, sv, root, 0)
	if _, err := fsys.Stat("hello.txt"); err != nil {
		t.Fatal(err)
	}
	dead := sv.last()
	if err := dead.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = dead.cli.Wait() // the client has seen the connection end
	_, err := fsys.Stat("hello.txt")
	if err == nil || errors.Is(err, syscall.ETIMEDOUT) || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat on a dead server = %v", err)
	}
	if !strings.Contains(err.Error(), "connection") {
		t.Fatalf("error %q does not say the connection failed", err)
	}
	if _, err := fsys.Stat("hello.txt"); err != nil {
		t.Fatalf("after the server died: %v", err)
	}
	if n := sv.connects.Load(); n != 2 {
		t.Fatalf("connects = %d, want 2", n)
	}
}

// TestEndedConnectionIsReplaced: a connection that ended while no call
// used it (SyncConnection.Done closed: the host's agent or the gateway
// restarted) is not used again: the next call connects anew and
// succeeds, as a Host's first use after a lost connection does, rather
// than failing on the dead one.
func TestEndedConnectionIsReplaced(t *testing.T) {
	root, _ := tree(t)
	sv := newServer(t)
	spec := &hostgate.SyncSpec{Connect: func(ctx context.Context) (*hostgate.SyncConnection, error) {
		c, err := sv.connect(ctx)
		if err != nil {
			return nil, err
		}
		done := make(chan struct{})
		cli := sv.last().cli
		go func() {
			_ = cli.Wait()
			close(done)
		}()
		c.Done = done
		return c, nil
	}}
	fsys := New(spec, &Options{Root: root})
	t.Cleanup(func() {
		if err := fsys.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if _, err := fsys.Stat("hello.txt"); err != nil {
		t.Fatal(err)
	}
	dead := sv.last()
	if err := dead.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = dead.cli.Wait() // the connection has ended, and Done is closing
	fsys.mu.Lock()
	s := fsys.cur
	fsys.mu.Unlock()
	<-s.conn.Done
	if _, err := fsys.Stat("hello.txt"); err != nil {
		t.Fatalf("first call after the connection ended: %v", err)
	}
	if n := sv.connects.Load(); n != 2 {
		t.Fatalf("connects = %d, want 2", n)
	}
}

// TestConnectFailureIsRetried: a failed connect fails the calls waiting on
// it and is not cached.
func TestConnectFailureIsRetried(t *testing.T) {
	root, _ := tree(t)
	sv := newServer(t)
	var calls atomic.Int32
	boom := errors.New("boom")
	spec := &hostgate.SyncSpec{Connect: func(ctx context.Context) (*hostgate.SyncConnection, error) {
		if calls.Add(1) == 1 {
			return nil, boom
		}
		return sv.connect(ctx)
	}}
	fsys := New(spec, &Options{Root: root})
	defer fsys.Close()
	if _, err := fsys.Stat("hello.txt"); !errors.Is(err, boom) {
		t.Fatalf("first stat = %v; want boom", err)
	}
	if _, err := fsys.Stat("hello.txt"); err != nil {
		t.Fatalf("second stat = %v", err)
	}
}

type noTransport struct{}

func (noTransport) Spawn(context.Context, []string, hostgate.SpawnOptions) (hostgate.Process, error) {
	return nil, errors.New("no processes here")
}

func TestNotSupported(t *testing.T) {
	host := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{Transport: noTransport{}, Close: func() error { return nil }}, nil
	})
	defer host.Close()
	for name, fsys := range map[string]*FS{
		"nil spec":        New(nil, nil),
		"no Connect":      New(&hostgate.SyncSpec{}, nil),
		"host without it": FromHost(host, nil),
	} {
		t.Run(name, func(t *testing.T) {
			defer fsys.Close()
			_, err := fsys.Stat("x")
			if !errors.Is(err, syscall.ENOTSUP) {
				t.Fatalf("stat = %v; want ENOTSUP", err)
			}
			if _, err := fsys.Open("x"); !errors.Is(err, syscall.ENOTSUP) {
				t.Errorf("open = %v", err)
			}
			if _, err := fsys.ReadFile("x"); !errors.Is(err, syscall.ENOTSUP) {
				t.Errorf("readfile = %v", err)
			}
			if err := fsys.WriteFile("x", []byte("x"), 0o600); !errors.Is(err, syscall.ENOTSUP) {
				t.Errorf("writefile = %v", err)
			}
			if err := fsys.MkdirAll("x", 0o700); !errors.Is(err, syscall.ENOTSUP) {
				t.Errorf("mkdirall = %v", err)
			}
		})
	}
}

// TestFromHost: the FS dials its own connection through the host's spec,
// never the host's main connection.
func TestFromHost(t *testing.T) {
	root, _ := tree(t)
	sv := newServer(t)
	var mainConnects int
	host := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
		mainConnects++
		return &hostgate.Connection{Transport: noTransport{}, Sync: sv.spec(), Close: func() error { return nil }}, nil
	})
	defer host.Close()
	fsys := FromHost(host, &Options{Root: root})
	defer fsys.Close()
	if sv.connects.Load() != 0 || mainConnects != 0 {
		t.Fatal("FromHost connected eagerly")
	}
	for range 3 {
		if b, err := fsys.ReadFile("hello.txt"); err != nil || string(b) != "hello, world\n" {
			t.Fatalf("read = %q, %v", b, err)
		}
	}
	if sv.connects.Load() != 1 || mainConnects != 1 {
		t.Fatalf("sync connects %d, main connects %d; want 1 and 1", sv.connects.Load(), mainConnects)
	}
}

// Closing the host closes the FS FromHost made: its own connection
// would otherwise outlive the host, in use.
func TestFromHostClosedWithHost(t *testing.T) {
	root, _ := tree(t)
	sv := newServer(t)
	host := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{Transport: noTransport{}, Sync: sv.spec(), Close: func() error { return nil }}, nil
	})
	fsys := FromHost(host, &Options{Root: root})
	defer fsys.Close()
	if _, err := fsys.Stat("hello.txt"); err != nil {
		t.Fatal(err)
	}
	_ = host.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := fsys.Stat("hello.txt")
		if errors.Is(err, fs.ErrClosed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Stat after the host closed: %v, want fs.ErrClosed", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConnectTimesOut: a connect that never answers fails the first call
// with ETIMEDOUT and is cancelled; the next call connects again.
func TestConnectTimesOut(t *testing.T) {
	root, _ := tree(t)
	sv := newServer(t)
	var calls atomic.Int32
	spec := &hostgate.SyncSpec{
		Timeout: 200 * time.Millisecond, // from the spec: Options leave it zero
		Connect: func(ctx context.Context) (*hostgate.SyncConnection, error) {
			if calls.Add(1) == 1 {
				<-ctx.Done() // a host that never answers, until abandoned
				return nil, context.Cause(ctx)
			}
			return sv.connect(ctx)
		},
	}
	fsys := New(spec, &Options{Root: root})
	defer fsys.Close()
	if _, err := fsys.Stat("hello.txt"); !errors.Is(err, syscall.ETIMEDOUT) {
		t.Fatalf("stat while connecting = %v; want ETIMEDOUT", err)
	}
	retries := eventually(t, func() error { _, err := fsys.Stat("hello.txt"); return err })
	if n := calls.Load(); n != 2+retries {
		t.Fatalf("connects = %d, want %d", n, 2+retries)
	}
}

// TestAnswersKeepTheConnection: errors that are the host's answers (a
// missing file, a directory read as a file, a non-empty directory) do not
// cost a reconnect.
func TestAnswersKeepTheConnection(t *testing.T) {
	root, _ := tree(t)
	sv := newServer(t)
	fsys := open(t, sv, root, 0)
	if _, err := fsys.Stat("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat missing = %v", err)
	}
	if _, err := fsys.ReadFile("dir"); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("ReadFile of a directory = %v; want EISDIR", err)
	}
	if err := fsys.Remove("dir"); err == nil {
		t.Fatal("Remove of a non-empty directory succeeded")
	}
	if _, err := fsys.ReadLink("hello.txt"); err == nil {
		t.Fatal("ReadLink of a file succeeded")
	}
	if _, err := fsys.Stat("hello.txt"); err != nil {
		t.Fatal(err)
	}
	if n := sv.connects.Load(); n != 1 {
		t.Fatalf("connects = %d, want 1", n)
	}
}

// TestDefaultRoot: without Options the names are relative to "/".
func TestDefaultRoot(t *testing.T) {
	root, _ := tree(t)
	sv := newServer(t)
	fsys := New(sv.spec(), nil)
	defer fsys.Close()
	b, err := fsys.ReadFile(strings.TrimPrefix(root, "/") + "/hello.txt")
	if err != nil || string(b) != "hello, world\n" {
		t.Fatalf("read = %q, %v", b, err)
	}
}

// TestCloseDuringConnect: Close cancels a connect that does not answer and
// releases the caller waiting on it.
func TestCloseDuringConnect(t *testing.T) {
	started := make(chan struct{})
	spec := &hostgate.SyncSpec{Connect: func(ctx context.Context) (*hostgate.SyncConnection, error) {
		close(started)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}}
	fsys := New(spec, &Options{Timeout: time.Hour})
	errc := make(chan error, 1)
	go func() { _, err := fsys.Stat("x"); errc <- err }()
	<-started
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("stat while closing = %v; want fs.ErrClosed", err)
	}
}
