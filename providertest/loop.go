package providertest

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"path"
	"strings"
	"syscall"
	"testing"

	"github.com/hostgate/hostgate"
)

// testSymlinkLoop: a lookup that goes round a symlink loop (a -> b,
// b -> a), at the name itself where the call follows it or on the way
// (a/x), is ELOOP, as the kernel says, and not ErrNotExist: a and b are
// there, and no name through them can be. The error names the path.
// (ExecProvider, and the SFTP provider against OpenSSH's sftp-server,
// whose SFTP v3 answers ELOOP as "no such file", said ErrNotExist.) The
// loop's links themselves stay usable: Lstat, Readlink, Remove.
func testSymlinkLoop(t *testing.T, ctx context.Context, p hostgate.Provider, root string) {
	a, b := path.Join(root, "a"), path.Join(root, "b")
	symlink(t, ctx, p, "b", a)
	symlink(t, ctx, p, "a", b)
	other := path.Join(root, "other")
	writeFile(t, ctx, p, other, []byte("o"), 0o644)
	check := func(what, name string, err error) {
		t.Helper()
		rel := strings.TrimPrefix(name, root+"/")
		wantErr(t, what+" "+rel, err, syscall.ELOOP)
		if errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s %s: %v is also ErrNotExist", what, rel, err)
		}
		if err != nil && !strings.Contains(err.Error(), name) {
			t.Errorf("%s %s: %q does not name the path", what, rel, err)
		}
	}
	// following makes the calls that follow name itself: at a they meet
	// the loop there, under it on the way.
	following := func(name string) {
		t.Helper()
		_, err := p.Stat(ctx, name)
		check("Stat", name, err)
		_, err = p.ReadDir(ctx, name)
		check("ReadDir", name, err)
		if r, err := p.Open(ctx, name); err == nil {
			_ = r.Close()
			t.Errorf("Open %s succeeded", name)
		} else {
			check("Open", name, err)
		}
		if w, err := p.Create(ctx, name, 0o644); err == nil {
			check("Create, at Close,", name, w.Close())
		} else {
			check("Create", name, err)
		}
		check("Chmod", name, p.Chmod(ctx, name, 0o600))
		_, err = p.Realpath(ctx, name)
		check("Realpath", name, err)
		if fr, ok := p.(hostgate.FileReader); ok {
			_, err := fr.ReadFile(ctx, name, nil)
			check("ReadFile", name, err)
		}
		if fw, ok := p.(hostgate.FileWriter); ok {
			check("WriteFile", name, fw.WriteFile(ctx, name, 0o644, bytes.NewReader([]byte("w")), nil))
		}
	}
	following(a)
	// Every call, through the loop on the way: those on the name itself
	// too.
	for _, name := range []string{path.Join(a, "x"), path.Join(a, "x", "y")} {
		following(name)
		_, err := p.Lstat(ctx, name)
		check("Lstat", name, err)
		check("Remove", name, p.Remove(ctx, name, false))
		check("Remove recursive", name, p.Remove(ctx, name, true))
		check("Rename from", name, p.Rename(ctx, name, path.Join(root, "y")))
		check("Rename onto", name, p.Rename(ctx, other, name))
		check("Symlink at", name, p.Symlink(ctx, "t", name))
		_, err = p.Readlink(ctx, name)
		check("Readlink", name, err)
		check("Mkdir", name, p.Mkdir(ctx, name, 0o755, false))
		check("Mkdir parents", name, p.Mkdir(ctx, name, 0o755, true))
	}
	if fi, err := p.Lstat(ctx, a); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Lstat of the loop's link: %v, %v", fi, err)
	}
	if got, err := p.Readlink(ctx, a); err != nil || got != "b" {
		t.Errorf("Readlink of the loop's link = %q, %v; want %q", got, err, "b")
	}
	if got := readFile(t, ctx, p, other); string(got) != "o" {
		t.Errorf("after the refused Renames onto a path through the loop, their source holds %q", got)
	}
	if err := p.Remove(ctx, a, false); err != nil {
		t.Errorf("Remove of the loop's link: %v", err)
	}
}
