package sshlayer

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hostgate/hostgate"
)

func TestSSHDSFTP(t *testing.T) {
	s := startSSHD(t, sshdOptions{})
	c := s.connect(t, nil)
	ctx := testCtx(t)
	dir := t.TempDir() // sshd runs on this machine as root: its files are ours

	// Concurrent first calls share one SFTP client.
	got := make([]hostgate.Provider, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := c.SFTP(ctx)
			if err != nil {
				t.Error(err)
			}
			got[i] = p
		}()
	}
	wg.Wait()
	fsys := got[0]
	for i, p := range got {
		if p != fsys || p == nil {
			t.Fatalf("SFTP call %d returned another provider", i)
		}
	}

	data := make([]byte, 3<<20+17)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "file with space")
	w, err := fsys.Create(ctx, name, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(w, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if onDisk, err := os.ReadFile(name); err != nil || !bytes.Equal(onDisk, data) {
		t.Fatalf("file on disk differs (%d bytes, %v)", len(onDisk), err)
	}
	fi, err := fsys.Stat(ctx, name)
	if err != nil || fi.Size() != int64(len(data)) || fi.Mode().Perm() != 0o640 {
		t.Errorf("stat: %v %v", fi, err)
	}
	r, err := fsys.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(r)
	_ = r.Close()
	if err != nil || !bytes.Equal(back, data) {
		t.Errorf("read back %d bytes (%v), want %d equal bytes", len(back), err, len(data))
	}
	ents, err := fsys.ReadDir(ctx, dir)
	if err != nil || len(ents) != 1 || ents[0].Name() != "file with space" {
		t.Errorf("readdir: %v %v", ents, err)
	}
	if _, err := fsys.Stat(ctx, filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat missing: %v, want fs.ErrNotExist", err)
	}

	// The Connection's FS is the same SFTP client, opened lazily.
	conn := c.Connection(nil)
	if fi, err := conn.FS.Stat(ctx, name); err != nil || fi.Size() != int64(len(data)) {
		t.Errorf("Connection FS stat: %v %v", fi, err)
	}
	_ = c.Close()
	if _, err := c.SFTP(ctx); !errors.Is(err, ErrClientClosed) {
		t.Errorf("SFTP after Close: %v, want ErrClientClosed", err)
	}
	if _, err := conn.FS.Stat(ctx, name); !errors.Is(err, ErrClientClosed) {
		t.Errorf("Connection FS after Close: %v, want ErrClientClosed", err)
	}
}

// SyncSpec opens a separate SSH connection per Connect, and its Close
// closes it.
func TestSSHDSyncSpec(t *testing.T) {
	s := startSSHD(t, sshdOptions{})
	ctx := testCtx(t)
	dials := 0
	spec := SyncSpec(func(ctx context.Context) (net.Conn, error) {
		dials++
		var d net.Dialer
		return d.DialContext(ctx, "tcp", s.addr())
	}, s.auth())
	main := s.connect(t, nil)
	h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) { return main.Connection(spec), nil })
	defer h.Close()
	got, err := h.Sync(ctx)
	if err != nil || got != spec {
		t.Fatalf("Host.Sync: %v %v", got, err)
	}
	for i := range 2 {
		sc, err := spec.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if dials != i+1 {
			t.Errorf("Connect %d dialed %d streams in total", i, dials)
		}
		if _, err := sc.FS.Stat(ctx, "/"); err != nil {
			t.Errorf("sync FS stat: %v", err)
		}
		// The bridge reads and writes whole files in fewer round trips
		// through these; the lazy provider must not hide them.
		if _, ok := sc.FS.(hostgate.FileReader); !ok {
			t.Errorf("sync FS %T is no hostgate.FileReader", sc.FS)
		}
		if _, ok := sc.FS.(hostgate.FileWriter); !ok {
			t.Errorf("sync FS %T is no hostgate.FileWriter", sc.FS)
		}
		if err := sc.Close(); err != nil {
			t.Errorf("sync close: %v", err)
		}
	}
	// The main connection is untouched by the sync connections.
	if _, _, err := run(ctx, t, main, []string{"true"}, hostgate.SpawnOptions{}, ""); err != nil {
		t.Errorf("main connection after sync closes: %v", err)
	}
	_ = h.Close()
	if err := s.waitIdle(ctx); err != nil {
		t.Errorf("connections left open: %v", err)
	}

	wrong := s.auth()
	wrong.HostKey = Fingerprint(s.user.Signer.PublicKey())
	if _, err := SyncSpec(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", s.addr())
	}, wrong).Connect(ctx); !errors.Is(err, ErrHostKeyMismatch) {
		t.Errorf("sync connect to the wrong key: %v", err)
	}
}

// Regression: once a host's SFTP session ended, its filesystem stayed dead
// for the life of the connection (the provider was cached forever) and
// every call said "connection lost" though the connection was up and exec
// still worked. Here OpenSSH's sftp-server is killed under an open file,
// three times over one connection: the call on the dead session says the
// SFTP session ended, and the next call works on a new session.
func TestSSHDSFTPSessionEndReopens(t *testing.T) {
	s := startSSHD(t, sshdOptions{})
	c := s.connect(t, nil)
	ctx := testCtx(t)
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	writeTestFile(t, name, []byte("hello"))
	held, err := c.SFTP(ctx) // obtained once, used throughout
	if err != nil {
		t.Fatal(err)
	}
	fsys := c.Connection(nil).FS
	for round := range 3 {
		r, err := fsys.Open(ctx, name)
		if err != nil {
			t.Fatalf("round %d: open: %v", round, err)
		}
		c.mu.Lock()
		old := c.sftp
		c.mu.Unlock()
		// The exec's shell and the sftp-server are both children of this
		// connection's sshd process, so this kills ours and no other.
		if _, stderr, err := run(ctx, t, c, []string{"sh", "-c", `kill -KILL $(pgrep -P "$PPID" -x sftp-server)`}, hostgate.SpawnOptions{}, ""); err != nil {
			t.Fatalf("round %d: kill sftp-server: %v %s", round, err, stderr)
		}
		select {
		case <-old.done:
		case <-ctx.Done():
			t.Fatalf("round %d: the session's end was not noticed", round)
		}
		_, err = io.ReadAll(r)
		_ = r.Close()
		if !errors.Is(err, ErrSFTPSessionEnded) || errors.Is(err, ErrConnectionLost) || !strings.Contains(err.Error(), "sftp session ended") {
			t.Errorf("round %d: read on the killed session: %v, want ErrSFTPSessionEnded and not ErrConnectionLost", round, err)
		}
		t.Logf("round %d: %v", round, err)
		if fi, err := fsys.Stat(ctx, name); err != nil || fi.Size() != 5 {
			t.Errorf("round %d: stat after the session ended: %v %v", round, fi, err)
		}
		if _, err := held.ReadDir(ctx, dir); err != nil {
			t.Errorf("round %d: a provider from SFTP before the end: %v", round, err)
		}
		if _, _, err := run(ctx, t, c, []string{"true"}, hostgate.SpawnOptions{}, ""); err != nil {
			t.Errorf("round %d: exec: %v", round, err)
		}
	}
	_ = c.Close()
	if _, err := held.Stat(ctx, name); !errors.Is(err, ErrClientClosed) {
		t.Errorf("held provider after Close: %v, want ErrClientClosed", err)
	}
}

// Regression: a path with a NUL byte was sent, and OpenSSH's sftp-server
// ends the whole session on one, failing every other call on it (here a
// file open for reading). It is refused before sending now, for each
// method and either name of Rename and Symlink.
func TestSSHDSFTPPathNULRefused(t *testing.T) {
	s := startSSHD(t, sshdOptions{})
	c := s.connect(t, nil)
	ctx := testCtx(t)
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	writeTestFile(t, name, []byte("hello"))
	fsys, err := c.SFTP(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := fsys.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	bad := filepath.Join(dir, "a\x00b")
	calls := map[string]func() error{
		"stat":     func() error { _, err := fsys.Stat(ctx, bad); return err },
		"lstat":    func() error { _, err := fsys.Lstat(ctx, bad); return err },
		"readdir":  func() error { _, err := fsys.ReadDir(ctx, bad); return err },
		"open":     func() error { _, err := fsys.Open(ctx, bad); return err },
		"create":   func() error { _, err := fsys.Create(ctx, bad, 0o644); return err },
		"mkdir":    func() error { return fsys.Mkdir(ctx, bad, 0o755, true) },
		"remove":   func() error { return fsys.Remove(ctx, bad, true) },
		"rename":   func() error { return fsys.Rename(ctx, name, bad) },
		"symlink":  func() error { return fsys.Symlink(ctx, bad, filepath.Join(dir, "l")) },
		"readlink": func() error { _, err := fsys.Readlink(ctx, bad); return err },
		"realpath": func() error { _, err := fsys.Realpath(ctx, bad); return err },
		"chmod":    func() error { return fsys.Chmod(ctx, bad, 0o600) },
	}
	for op, call := range calls {
		if err := call(); !errors.Is(err, fs.ErrInvalid) || !strings.Contains(err.Error(), "NUL byte") {
			t.Errorf("%s with a NUL in a path: %v, want fs.ErrInvalid naming the NUL byte", op, err)
		}
	}
	if got, err := io.ReadAll(r); err != nil || string(got) != "hello" {
		t.Errorf("the file open before: %q %v, want hello", got, err)
	}
}
