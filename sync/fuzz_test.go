package syncfs

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
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
