//go:build unix

package sshlayer

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestSFTPProviderRemoveRefusesDotNames: a recursive Remove of a name
// whose last element is "." or ".." is refused (EINVAL, as os.RemoveAll
// says; rm -rf, ExecProvider's, refuses them too) before anything is
// removed. The provider listed and removed what was in the directory,
// and only the final rmdir failed: Remove(ctx, "d/.", true) emptied d,
// and "." the whole working directory, the user's home.
func TestSFTPProviderRemoveRefusesDotNames(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"d/sub"} {
		if err := os.MkdirAll(dir+"/"+d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"keep", "d/keep", "d/sub/keep"} {
		if err := os.WriteFile(dir+"/"+f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := connectEmbedded(t, srvStartServer(t, &ServerConfig{Dir: dir}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := c.SFTP(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{dir + "/d/.", dir + "/d/sub/..", dir + "/d/./", "d/sub/.", ".", "..", dir + "/d/sub/../"} {
		err := p.Remove(ctx, name, true)
		if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("Remove(%q, recursive): %v, want EINVAL", name, err)
		}
		for _, f := range []string{"keep", "d/keep", "d/sub/keep"} {
			if _, err := os.Stat(dir + "/" + f); err != nil {
				t.Fatalf("after Remove(%q, recursive): %v", name, err)
			}
		}
	}
	// A name with dots that is not "." or "..", and one that goes
	// through ".." to a directory of its own name, are removed.
	if err := p.Remove(ctx, dir+"/d/sub/../sub", true); err != nil {
		t.Errorf("Remove d/sub/../sub: %v", err)
	}
	if _, err := os.Stat(dir + "/d/sub"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("d/sub after its Remove: %v", err)
	}
}
