//go:build unix

package sshlayer

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestSFTPProviderEmptyPathNamesNoFile: an empty path is no file, as
// the kernel, ExecProvider and OpenSSH's sftp-server have it (ENOENT),
// not the agent's working directory, which pkg/sftp's server took it
// for: Remove(ctx, "", true) emptied the whole directory (the user's
// home by default) and Chmod changed its mode. Realpath("") stays ".",
// as OpenSSH's sftp-server answers it.
func TestSFTPProviderEmptyPathNamesNoFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/keep", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := connectEmbedded(t, srvStartServer(t, &ServerConfig{Dir: dir}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := c.SFTP(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, statErr := p.Stat(ctx, "")
	_, lstatErr := p.Lstat(ctx, "")
	_, readDirErr := p.ReadDir(ctx, "")
	for what, err := range map[string]error{
		"Stat":             statErr,
		"Lstat":            lstatErr,
		"ReadDir":          readDirErr,
		"Chmod":            p.Chmod(ctx, "", 0o700),
		"Remove recursive": p.Remove(ctx, "", true),
		"Remove":           p.Remove(ctx, "", false),
		"Rename from":      p.Rename(ctx, "", "elsewhere"),
	} {
		if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, syscall.ENOENT) {
			t.Errorf("%s of an empty path: %v, want ENOENT", what, err)
		}
	}
	if _, err := os.Stat(dir + "/keep"); err != nil {
		t.Errorf("the working directory's file: %v", err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the working directory: %v, %v, want drwxr-xr-x", fi, err)
	}
	if got, err := p.Realpath(ctx, ""); err != nil || got != dir {
		t.Errorf("Realpath of an empty path = %q, %v; want the working directory %s", got, err, dir)
	}
}
