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
