//go:build unix

package hostgate_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/localexec"
)

// homeTransport runs every process in home, as a host runs its commands
// in the user's home directory.
type homeTransport struct {
	hostgate.Transport
	home string
}

func (t homeTransport) Spawn(ctx context.Context, argv []string, opts hostgate.SpawnOptions) (hostgate.Process, error) {
	if opts.Dir == "" {
		opts.Dir = t.home
	}
	return t.Transport.Spawn(ctx, argv, opts)
}

// TestTransferRelativeDirIsHomes: a relative directory of Upload and
// Download, and of ExecProvider's ReadDir, is the one in the home
// directory, whatever the host's environment holds: cd took "-" for
// $OLDPWD, and a name CDPATH has for the directory there.
func TestTransferRelativeDirIsHomes(t *testing.T) {
	top := t.TempDir()
	home, elsewhere := filepath.Join(top, "home"), filepath.Join(top, "elsewhere")
	for _, d := range []string{home, filepath.Join(elsewhere, "x")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("OLDPWD", filepath.Join(elsewhere, "x"))
	t.Setenv("CDPATH", elsewhere)
	tr := homeTransport{&localexec.Transport{}, home}
	h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{Transport: tr, Close: func() error { return nil }}, nil
	})
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tree := fstest.MapFS{"f": {Data: []byte("up"), Mode: 0o644}}
	for _, dir := range []string{"-", "x"} {
		for _, noTar := range []bool{false, true} {
			opts := &hostgate.TransferOptions{NoTar: noTar}
			if err := hostgate.Upload(ctx, h, tree, dir, opts); err != nil {
				t.Fatalf("Upload to %s (NoTar %v): %v", dir, noTar, err)
			}
			if b, err := os.ReadFile(filepath.Join(home, dir, "f")); string(b) != "up" {
				t.Errorf("Upload to %s (NoTar %v): home's %s/f is %q, %v", dir, noTar, dir, b, err)
			}
			if _, err := os.Stat(filepath.Join(elsewhere, "x", "f")); err == nil {
				t.Errorf("Upload to %s (NoTar %v): written to %s", dir, noTar, filepath.Join(elsewhere, "x"))
				_ = os.Remove(filepath.Join(elsewhere, "x", "f"))
			}
			if err := os.WriteFile(filepath.Join(elsewhere, "x", "other"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "down")
			if err := hostgate.Download(ctx, h, dir, dst, opts); err != nil {
				t.Fatalf("Download of %s (NoTar %v): %v", dir, noTar, err)
			}
			if ents, _ := os.ReadDir(dst); len(ents) != 1 || ents[0].Name() != "f" {
				t.Errorf("Download of %s (NoTar %v): got %v, want home's %s: [f]", dir, noTar, ents, dir)
			}
			_ = os.Remove(filepath.Join(elsewhere, "x", "other"))
		}
	}
}
