package providertest

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
)

// testChtimes: a provider that sets times (hostgate.TimeSetter) sets a
// file's, a directory's and, through a link, its target's modification
// time to the second, leaves one given as zero, makes no file that is
// not there, and takes every name byte for byte; Lchtimes sets a link's
// own, or says ErrNotSupported.
func testChtimes(t *testing.T, ctx context.Context, p hostgate.Provider, root string) {
	ts, ok := p.(hostgate.TimeSetter)
	if !ok {
		t.Skip("the provider sets no times (hostgate.TimeSetter)")
	}
	wantMtime := func(what, name string, want time.Time) {
		t.Helper()
		fi, err := p.Stat(ctx, name)
		if err != nil {
			t.Fatalf("%s: Stat %q: %v", what, name, err)
		}
		if got := fi.ModTime(); got.Unix() != want.Unix() {
			t.Errorf("%s: %q has mtime %v, want %v", what, name, got.UTC(), want.UTC())
		}
	}
	t1 := time.Date(2001, 9, 9, 1, 46, 40, 0, time.UTC)
	t2 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	t3 := time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC)

	f := path.Join(root, "f")
	writeFile(t, ctx, p, f, []byte("x"), 0o644)
	if err := ts.Chtimes(ctx, f, t1, t2); err != nil {
		t.Fatalf("Chtimes %q: %v", f, err)
	}
	wantMtime("Chtimes", f, t2)
	if err := ts.Chtimes(ctx, f, t3, time.Time{}); err != nil {
		t.Fatalf("Chtimes %q, mtime zero: %v", f, err)
	}
	wantMtime("Chtimes with a zero mtime", f, t2)
	if err := ts.Chtimes(ctx, f, time.Time{}, t1); err != nil {
		t.Fatalf("Chtimes %q, atime zero: %v", f, err)
	}
	wantMtime("Chtimes with a zero atime", f, t1)
	// Finer than a second: the second it is in.
	if err := ts.Chtimes(ctx, f, t3.Add(700*time.Millisecond), t3.Add(700*time.Millisecond)); err != nil {
		t.Fatalf("Chtimes %q, a fraction of a second: %v", f, err)
	}
	wantMtime("Chtimes with a fraction of a second", f, t3)

	d := path.Join(root, "d")
	mkdir(t, ctx, p, d)
	if err := ts.Chtimes(ctx, d, t2, t2); err != nil {
		t.Fatalf("Chtimes of a directory: %v", err)
	}
	wantMtime("Chtimes of a directory", d, t2)

	// A link leads to its target, as os.Chtimes.
	l := path.Join(root, "l")
	symlink(t, ctx, p, "f", l)
	if err := ts.Chtimes(ctx, l, t2, t2); err != nil {
		t.Fatalf("Chtimes of a link: %v", err)
	}
	wantMtime("Chtimes of a link", f, t2)

	missing := path.Join(root, "missing")
	wantErr(t, "Chtimes of a missing file", ts.Chtimes(ctx, missing, t1, t1), fs.ErrNotExist)
	if _, err := p.Lstat(ctx, missing); err == nil {
		t.Errorf("Chtimes of a missing file made it")
	}
	dangling := path.Join(root, "dangling")
	symlink(t, ctx, p, "missing", dangling)
	wantErr(t, "Chtimes through a dangling link", ts.Chtimes(ctx, dangling, t1, t1), fs.ErrNotExist)
	if _, err := p.Lstat(ctx, missing); err == nil {
		t.Errorf("Chtimes through a dangling link made its target")
	}

	// Lchtimes: a link's own time, its target's left; a dangling link's,
	// its target not made. Or, for all, a provider that cannot.
	switch err := ts.Lchtimes(ctx, l, t1, t1); {
	case err == nil:
		fi, err := p.Lstat(ctx, l)
		if err != nil {
			t.Fatalf("Lstat %q: %v", l, err)
		}
		if fi.ModTime().Unix() != t1.Unix() {
			t.Errorf("Lchtimes of a link: its own mtime is %v, want %v", fi.ModTime().UTC(), t1)
		}
		wantMtime("Lchtimes of a link leaves its target", f, t2)
		if err := ts.Lchtimes(ctx, dangling, t3, t3); err != nil {
			t.Errorf("Lchtimes of a dangling link: %v", err)
		}
		if _, err := p.Lstat(ctx, missing); err == nil {
			t.Errorf("Lchtimes of a dangling link made its target")
		}
		if err := ts.Lchtimes(ctx, d, t1, t1); err != nil {
			t.Errorf("Lchtimes of a directory: %v", err)
		}
		wantMtime("Lchtimes of a directory", d, t1)
		wantErr(t, "Lchtimes of a missing file", ts.Lchtimes(ctx, missing, t1, t1), fs.ErrNotExist)
		if _, err := p.Lstat(ctx, missing); err == nil {
			t.Errorf("Lchtimes of a missing file made it")
		}
	case errors.Is(err, hostgate.ErrNotSupported):
		t.Logf("Lchtimes: %v", err)
	default:
		t.Errorf("Lchtimes of a link: %v, want it set or ErrNotSupported", err)
	}

	// Before 1970: set, or refused as a time the provider cannot carry.
	old := time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)
	switch err := ts.Chtimes(ctx, f, old, old); {
	case err == nil:
		wantMtime("Chtimes before 1970", f, old)
	case errors.Is(err, hostgate.ErrNotSupported):
	default:
		t.Errorf("Chtimes before 1970: %v, want it set or ErrNotSupported", err)
	}

	names := path.Join(root, "names")
	mkdir(t, ctx, p, names)
	for _, n := range hardNames {
		name := path.Join(names, n)
		writeFile(t, ctx, p, name, []byte("x"), 0o644)
		if err := ts.Chtimes(ctx, name, t1, t1); err != nil {
			t.Errorf("Chtimes %q: %v", n, err)
			continue
		}
		wantMtime("Chtimes of a hard name", name, t1)
	}
}
