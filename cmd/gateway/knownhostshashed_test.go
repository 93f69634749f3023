package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh/knownhosts"
)

// TestHashedKnownHostLine: a known_hosts file whose names are hashed
// (HashKnownHosts yes, Debian's default; ssh-keygen -H) names the host
// too. gateway proxy --known-hosts left a hashed line with a key reset
// since unmended, as if the file had no line for the host (ssh then
// refused the host), and a rewrite (gateway cert) kept the stale hashed
// line and added one naming the host in the clear. The stale line is now
// replaced by one hashed anew, which ssh-keygen -F finds with the pinned
// key, the other lines kept; a host id in capitals is hashed lower-cased,
// as ssh looks it up.
func TestHashedKnownHostLine(t *testing.T) {
	const (
		stale  = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
		pinned = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBxd0LxX2Zxcj1CXxzhKZqvSZ0IW+hJmTg4nDvtB3d7w"
		others = "|1|c2FsdHNhbHRzYWx0c2FsdHNhbHQ=|AAAAAAAAAAAAAAAAAAAAAAAAAAA= " + stale + "\nplain.example " + stale + "\n"
	)
	for _, host := range []string{"box", "Box"} {
		t.Run(host, func(t *testing.T) {
			kh := filepath.Join(t.TempDir(), "known_hosts")
			if err := os.WriteFile(kh, []byte(others+knownhosts.HashHostname("box")+" "+stale+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if named, current, err := knownHostLine(kh, host, pinned); err != nil || !named || current {
				t.Fatalf("knownHostLine: named %v, current %v, %v; want the hashed line found, not current", named, current, err)
			}
			if !hasKnownHost(kh, host) {
				t.Error("hasKnownHost: false; gateway cert would ask the gateway at every run")
			}
			var stderr bytes.Buffer
			mendKnownHost(&stderr, kh, host, pinned) // gateway proxy --known-hosts
			b, err := os.ReadFile(kh)
			if err != nil {
				t.Fatal(err)
			}
			got := string(b)
			if !strings.HasPrefix(got, others) || strings.Count(got, "\n") != 3 {
				t.Fatalf("known_hosts after the mend:\n%s\nwant the other lines kept and one line for the host (proxy said %q)", got, stderr.String())
			}
			last := strings.Fields(strings.TrimPrefix(got, others))
			if len(last) != 3 || !strings.HasPrefix(last[0], "|1|") || last[1]+" "+last[2] != pinned {
				t.Fatalf("the host's line %q, want it hashed, with the pinned key", last)
			}
			if hashed, ok := knownHostNamed(last[0], "box"); !hashed || !ok {
				t.Errorf("the new line's name %q does not name box", last[0])
			}
			if _, current, _ := knownHostLine(kh, host, pinned); !current {
				t.Error("not current after the mend")
			}
			keygen, err := exec.LookPath("ssh-keygen")
			if err != nil {
				t.Skip("no ssh-keygen to look the host up as ssh does")
			}
			out, err := exec.Command(keygen, "-F", "box", "-f", kh).Output()
			if err != nil || !strings.Contains(string(out), pinned) || strings.Contains(string(out), stale) {
				t.Errorf("ssh-keygen -F box: %v\n%s\nwant the pinned key alone", err, out)
			}
		})
	}
}
