package syncfs

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/hostgate/hostgate"
)

// failStat fails the Stat of a file named "lost" with the error of a lost
// connection, which names the host itself (as sshlayer's does).
type failStat struct{ hostgate.Provider }

var errLost = errors.New("host build-01: sshlayer: connection lost: EOF")

func (p failStat) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	if strings.HasSuffix(name, "/lost") {
		return nil, errLost
	}
	return p.Provider.Stat(ctx, name)
}

// opened is a call of use on the opened file name, closed after; an
// Open that fails makes it return nil, which the test reports.
func opened(name string, use func(fs.File) error) func(f *FS) error {
	return func(f *FS) error {
		fl, err := f.Open(name)
		if err != nil {
			return nil
		}
		defer fl.Close()
		return use(fl)
	}
}

func second[T any](_ T, err error) error { return err }

// TestErrorsNameTheHost: every error of the bridge names its host once,
// as a Host's errors do ("host build-01: stat x: file does not exist"),
// whether the name comes from the spec (New), the Host's connection or
// NewNamed (FromHost), and keeps what callers test: errors.Is, the
// *fs.PathError or *os.LinkError, os.IsNotExist. The bridge rebuilt the
// provider's path errors with io/fs names and said nothing of the host.
func TestErrorsNameTheHost(t *testing.T) {
	root, _ := tree(t)
	sv := newServer(t)
	sv.wrap = func(p hostgate.Provider) hostgate.Provider { return failStat{p} }
	opts := &Options{Root: root}
	hostWith := func(name string, spec *hostgate.SyncSpec) *hostgate.Host {
		return hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
			return &hostgate.Connection{Name: name, Transport: noTransport{}, Sync: spec, Close: func() error { return nil }}, nil
		})
	}
	makers := []struct {
		name  string
		named bool
		fs    func(t *testing.T) *FS
	}{
		{"New with spec.Name", true, func(t *testing.T) *FS {
			spec := sv.spec()
			spec.Name = "build-01"
			return New(spec, opts)
		}},
		{"FromHost with Connection.Name", true, func(t *testing.T) *FS {
			h := hostWith("build-01", sv.spec())
			t.Cleanup(func() { _ = h.Close() })
			return FromHost(h, opts)
		}},
		{"FromHost of NewNamed", true, func(t *testing.T) *FS {
			h := hostgate.NewNamed("build-01", hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
				return &hostgate.Connection{Transport: noTransport{}, Sync: sv.spec(), Close: func() error { return nil }}, nil
			})
			t.Cleanup(func() { _ = h.Close() })
			return FromHost(h, opts)
		}},
		{"no name", false, func(t *testing.T) *FS { return New(sv.spec(), opts) }},
	}
	type pathOrLink int
	const (
		pathErr pathOrLink = iota
		linkErr
	)
	calls := []struct {
		name string
		call func(f *FS) error
		is   error // nil: any cause
		kind pathOrLink
	}{
		{"Stat", func(f *FS) error { _, err := f.Stat("missing"); return err }, fs.ErrNotExist, pathErr},
		{"Stat of an invalid name", func(f *FS) error { _, err := f.Stat("../x"); return err }, fs.ErrInvalid, pathErr},
		{"Stat on a lost connection", func(f *FS) error { _, err := f.Stat("lost"); return err }, errLost, pathErr},
		{"Lstat", func(f *FS) error { _, err := f.Lstat("missing"); return err }, fs.ErrNotExist, pathErr},
		{"Open", func(f *FS) error { _, err := f.Open("missing"); return err }, fs.ErrNotExist, pathErr},
		{"OpenFile for writing", func(f *FS) error { _, err := f.OpenFile("hello.txt", os.O_WRONLY, 0); return err }, syscall.ENOTSUP, pathErr},
		{"ReadFile", func(f *FS) error { _, err := f.ReadFile("missing"); return err }, fs.ErrNotExist, pathErr},
		{"ReadDir", func(f *FS) error { _, err := f.ReadDir("missing"); return err }, fs.ErrNotExist, pathErr},
		{"ReadLink", func(f *FS) error { _, err := f.ReadLink("missing"); return err }, fs.ErrNotExist, pathErr},
		{"WriteFile", func(f *FS) error { return f.WriteFile("missing/x", []byte("x"), 0o600) }, fs.ErrNotExist, pathErr},
		{"MkdirAll", func(f *FS) error { return f.MkdirAll("hello.txt/x", 0o700) }, nil, pathErr},
		{"Remove", func(f *FS) error { return f.Remove("missing") }, fs.ErrNotExist, pathErr},
		{"Remove of the root", func(f *FS) error { return f.Remove(".") }, fs.ErrInvalid, pathErr},
		{"RemoveAll of the root", func(f *FS) error { return f.RemoveAll(".") }, fs.ErrInvalid, pathErr},
		{"Rename", func(f *FS) error { return f.Rename("missing", "other") }, fs.ErrNotExist, linkErr},
		{"Symlink", func(f *FS) error { return f.Symlink("x", "missing/link") }, nil, linkErr},
		{"file Read after Close", opened("hello.txt", func(fl fs.File) error {
			_ = fl.Close()
			return second(fl.Read(make([]byte, 1)))
		}), fs.ErrClosed, pathErr},
		{"file Close twice", opened("hello.txt", func(fl fs.File) error {
			_ = fl.Close()
			return fl.Close()
		}), fs.ErrClosed, pathErr},
		{"file Seek before the start", opened("hello.txt", func(fl fs.File) error {
			return second(fl.(io.Seeker).Seek(-1, io.SeekStart))
		}), fs.ErrInvalid, pathErr},
		{"directory Read", opened("dir", func(d fs.File) error {
			return second(d.Read(make([]byte, 1)))
		}), syscall.EISDIR, pathErr},
		{"directory ReadDir after Close", opened("dir", func(d fs.File) error {
			_ = d.Close()
			return second(d.(fs.ReadDirFile).ReadDir(-1))
		}), fs.ErrClosed, pathErr},
	}
	for _, m := range makers {
		t.Run(m.name, func(t *testing.T) {
			f := m.fs(t)
			defer f.Close()
			for _, c := range calls {
				err := c.call(f)
				if err == nil {
					t.Errorf("%s: no error", c.name)
					continue
				}
				msg := err.Error()
				want := 0
				if m.named || c.is == errLost {
					want = 1
				}
				if n := strings.Count(msg, "build-01"); n != want {
					t.Errorf("%s: %q names the host %d times, want %d", c.name, msg, n, want)
				}
				if m.named && c.is != errLost && !strings.HasPrefix(msg, "host build-01: ") {
					t.Errorf("%s: %q, want it to begin with the host, as a Host's errors do", c.name, msg)
				}
				if c.is != nil && !errors.Is(err, c.is) {
					t.Errorf("%s: %q is not %v", c.name, msg, c.is)
				}
				if c.is == fs.ErrNotExist && !os.IsNotExist(err) {
					t.Errorf("%s: %q: os.IsNotExist is false", c.name, msg)
				}
				switch c.kind {
				case pathErr:
					var pe *fs.PathError
					if !errors.As(err, &pe) || err != error(pe) {
						t.Errorf("%s: %q (%T) is not a *fs.PathError", c.name, msg, err)
					} else if strings.Contains(pe.Path, root) || strings.Contains(pe.Path, "build-01") {
						t.Errorf("%s: path %q, want the io/fs name", c.name, pe.Path)
					}
				case linkErr:
					if _, ok := err.(*os.LinkError); !ok {
						t.Errorf("%s: %q (%T) is not a *os.LinkError", c.name, msg, err)
					}
				}
			}
		})
	}
}

// A Host's failed connect names the host once in the bridge's error too,
// through the Host (NewNamed), and the bridge adds no second name.
func TestFromHostConnectErrorNamesTheHost(t *testing.T) {
	boom := errors.New("boom")
	h := hostgate.NewNamed("build-01", hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
		return nil, boom
	})
	defer h.Close()
	f := FromHost(h, nil)
	defer f.Close()
	_, err := f.Stat("x")
	if err == nil || strings.Count(err.Error(), "build-01") != 1 || !errors.Is(err, boom) {
		t.Fatalf("Stat with the host's connect failing: %v; want it naming build-01 once, wrapping the cause", err)
	}
	if _, ok := err.(*fs.PathError); !ok {
		t.Errorf("%T, want *fs.PathError", err)
	}
}
