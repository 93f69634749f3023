package syncfs

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hostgate/hostgate"
)

// FuzzHostPath: a name either is refused with fs.ErrInvalid or maps to a
// path at or under the root, never climbing out of it.
func FuzzHostPath(f *testing.F) {
	for _, s := range []string{".", "a", "a/b", "../x", "/etc", "a/../..", "a//b", "-x", "a\x00b", "é/\xff"} {
		f.Add(s)
	}
	fsys := New(nil, &Options{Root: "/srv/root"})
	f.Fuzz(func(t *testing.T, name string) {
		hp, err := fsys.hostPath("stat", name)
		if err != nil {
			if !errors.Is(err, fs.ErrInvalid) || fs.ValidPath(name) {
				t.Fatalf("%q refused with %v", name, err)
			}
			return
		}
		if hp != "/srv/root" && !strings.HasPrefix(hp, "/srv/root/") {
			t.Fatalf("%q maps to %q, outside the root", name, hp)
		}
		for _, el := range strings.Split(hp, "/") {
			if el == ".." {
				t.Fatalf("%q maps to %q", name, hp)
			}
		}
	})
}

// listing is a provider whose every directory lists names, in that order.
type listing struct {
	hostgate.Provider // only ReadDir is called
	names             []string
}

type fuzzInfo string

func (i fuzzInfo) Name() string       { return string(i) }
func (i fuzzInfo) Size() int64        { return 0 }
func (i fuzzInfo) Mode() fs.FileMode  { return fs.ModeDir | 0o755 }
func (i fuzzInfo) ModTime() time.Time { return time.Time{} }
func (i fuzzInfo) IsDir() bool        { return true }
func (i fuzzInfo) Sys() any           { return nil }

func (l listing) ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	ents := make([]fs.DirEntry, len(l.names))
	for i, n := range l.names {
		ents[i] = fs.FileInfoToDirEntry(fuzzInfo(n))
	}
	return ents, nil
}

// FuzzReadDir: of the names a hostile host lists, the listing keeps, in
// order, each that is one name in the directory (not empty, "." or "..",
// UTF-8, with no "/" or NUL byte), and only those: joined to the
// directory's io/fs name (as fs.WalkDir joins it), each is a valid io/fs
// name in that directory, which maps to that entry on the host.
func FuzzReadDir(f *testing.F) {
	for _, s := range [][3]string{
		{"a", "b", "c"}, {".", "..", ""}, {"/", "x/y", "a/.."}, {"a\x00b", "\x00", "ok"},
		{"é", "\xff", "-x"}, {"..a", "a..", " "}, {"\\", "a\\..", "~"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	fsys := New(nil, &Options{Root: "/srv/root"})
	f.Fuzz(func(t *testing.T, a, b, c string) {
		host := []string{a, b, c}
		list, err := readDir(context.Background(), listing{names: host}, "/srv/root/d")
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, n := range host {
			if n != "" && n != "." && n != ".." && utf8.ValidString(n) && !strings.ContainsAny(n, "/\x00") {
				want = append(want, n)
			}
		}
		var got []string
		for _, e := range list {
			got = append(got, e.Name())
			full := path.Join("d", e.Name())
			if !fs.ValidPath(full) || path.Dir(full) != "d" || path.Base(full) != e.Name() {
				t.Errorf("listed %q: joined to d it is %q, not one name in d", e.Name(), full)
			}
			if hp, err := fsys.hostPath("stat", full); err != nil || hp != "/srv/root/d/"+e.Name() {
				t.Errorf("listed %q: %q maps to %q, %v; want the host's entry", e.Name(), full, hp, err)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("host listed %q: got %q, want %q", host, got, want)
		}
	})
}
