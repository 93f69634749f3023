//go:build unix

package syncfs

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/sshtest"
	"github.com/hostgate/hostgate/sshlayer"
)

// The benchmarks measure the bridge against the same provider called
// directly (the async path), each over its own sftp-server child, so the
// ratio is the bridge's cost: a goroutine and a timer per call.

func benchSetup(b *testing.B) (*FS, hostgate.Provider, string) {
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "4k"), make([]byte, 4096), 0o600); err != nil {
		b.Fatal(err)
	}
	sv := newServer(b)
	fsys := open(b, sv, root, 0)
	// The direct path's own child, closed before open's cleanup checks
	// that every child was reaped.
	conn, err := sv.connect(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return fsys, conn.FS, root
}

func BenchmarkStat(b *testing.B) {
	fsys, direct, root := benchSetup(b)
	ctx := context.Background()
	b.Run("sync", func(b *testing.B) {
		for b.Loop() {
			if _, err := fsys.Stat("4k"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("direct", func(b *testing.B) {
		name := filepath.Join(root, "4k")
		for b.Loop() {
			if _, err := direct.Stat(ctx, name); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkRead4K(b *testing.B) {
	fsys, direct, root := benchSetup(b)
	ctx := context.Background()
	b.Run("sync", func(b *testing.B) {
		b.SetBytes(4096)
		for b.Loop() {
			if data, err := fsys.ReadFile("4k"); err != nil || len(data) != 4096 {
				b.Fatal(len(data), err)
			}
		}
	})
	b.Run("direct", func(b *testing.B) {
		b.SetBytes(4096)
		name := filepath.Join(root, "4k")
		for b.Loop() {
			r, err := direct.Open(ctx, name)
			if err != nil {
				b.Fatal(err)
			}
			data, err := io.ReadAll(r)
			_ = r.Close()
			if err != nil || len(data) != 4096 {
				b.Fatal(len(data), err)
			}
		}
	})
}

// BenchmarkStatSSH is BenchmarkStat over the real path: SFTP over SSH
// (sshlayer's loopback server), bridge and direct each on their own
// connection.
func BenchmarkStatSSH(b *testing.B) {
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "4k"), make([]byte, 4096), 0o600); err != nil {
		b.Fatal(err)
	}
	ts, auth := sshtest.Server(b)
	spec := sshlayer.SyncSpec(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", ts.Addr)
	}, auth)
	direct, err := spec.Connect(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = direct.Close() })
	fsys := New(spec, &Options{Root: root})
	b.Cleanup(func() { _ = fsys.Close() })
	ctx := context.Background()
	b.Run("sync", func(b *testing.B) {
		for b.Loop() {
			if _, err := fsys.Stat("4k"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("direct", func(b *testing.B) {
		name := filepath.Join(root, "4k")
		for b.Loop() {
			if _, err := direct.FS.Stat(ctx, name); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStream16M reads a 16 MiB file through Open and io.ReadAll.
func BenchmarkStream16M(b *testing.B) {
	const size = 16 << 20
	fsys, direct, root := benchSetup(b)
	if err := os.WriteFile(filepath.Join(root, "16m"), make([]byte, size), 0o600); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("sync", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			f, err := fsys.Open("16m")
			if err != nil {
				b.Fatal(err)
			}
			data, err := io.ReadAll(f)
			_ = f.Close()
			if err != nil || len(data) != size {
				b.Fatal(len(data), err)
			}
		}
	})
	b.Run("direct", func(b *testing.B) {
		b.SetBytes(size)
		name := filepath.Join(root, "16m")
		for b.Loop() {
			r, err := direct.Open(ctx, name)
			if err != nil {
				b.Fatal(err)
			}
			data, err := io.ReadAll(r)
			_ = r.Close()
			if err != nil || len(data) != size {
				b.Fatal(len(data), err)
			}
		}
	})
}
