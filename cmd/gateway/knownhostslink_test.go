package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPinKnownHostThroughSymlink: a known_hosts file kept elsewhere (a
// dotfiles repository) and linked into ~/.ssh is written where the link
// points. The rewrite renamed its copy over the link: the link was gone,
// the file it pointed to never saw the line, and the two went on apart.
// A link to a file not made yet is followed too.
func TestPinKnownHostThroughSymlink(t *testing.T) {
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
	dotfiles, ssh := t.TempDir(), t.TempDir()
	for _, tc := range []struct{ name, before string }{
		{"existing", "mine.example " + key + "\n"},
		{"not made yet", ""},
	} {
		target := filepath.Join(dotfiles, tc.name)
		if tc.before != "" {
			if err := os.WriteFile(target, []byte(tc.before), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		link := filepath.Join(ssh, tc.name)
		if err := os.Symlink(filepath.Join("..", filepath.Base(dotfiles), tc.name), link); err != nil {
			t.Fatal(err)
		}
		if err := pinKnownHost(link, "box", key); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s: the link was replaced (%v, %v)", tc.name, fi.Mode(), err)
		}
		b, err := os.ReadFile(target)
		if want := tc.before + "box " + key + "\n"; err != nil || string(b) != want {
			t.Errorf("%s: the file linked to holds %q (%v), want %q", tc.name, b, err, want)
		}
		if named, current, err := knownHostLine(link, "box", key); err != nil || !named || !current {
			t.Errorf("%s: through the link: named %v current %v (%v)", tc.name, named, current, err)
		}
	}
}
