package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzPinKnownHost: `gateway cert --known-hosts` rewrites a file that is
// the user's (any lines: comments, markers, hashed names, CRLF, no final
// newline) with a key the gateway sent. Pinned, the file holds every line
// it held that does not name the host, in order, and one line for the
// host, which knownHostLine then finds current (so the next run leaves
// the file alone), and pinning again changes nothing. A key that is not
// one public key is refused, the file untouched: written as it came, a
// key holding a newline put lines of the gateway's choosing into the
// user's known_hosts, for any host.
func FuzzPinKnownHost(f *testing.F) {
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
	f.Add("", key)
	f.Add("other "+key+"\nbox ssh-rsa AAAA\n", key+" comment\n")
	f.Add("# c\r\nbox "+key+"\r\n@cert-authority * "+key, key)
	f.Add("|1|abc= "+key+"\nbox\n\nbox  x y z", "  "+key+"  ")
	f.Add("box "+key, key+"\n* "+key)
	f.Add("a\x00b\n\xff", "ssh-ed25519")
	f.Add("x", key+" "+key)
	// box hashed (HashKnownHosts yes), and other names hashed: one
	// that is no hash, and Box, which ssh never looks up (it lower-cases
	// the name).
	f.Add("|1|S2ZUJ5ZoYYRKQ1IeNjMBbsg0vS8=|5T33NFyS2VuSxbl3N83L7jaDSoE= "+key+"\n|1|c2FsdA==|AAAA "+key+"\n", key)
	f.Add("|1|c2FsdHNhbHQ=|"+base64.StdEncoding.EncodeToString(hashHostName([]byte("saltsalt"), "Box"))+" ssh-rsa AAAA\n", key)
	f.Fuzz(func(t *testing.T, file, hostKey string) {
		const host = "box"
		// A line names the host as written, or hashed.
		names := func(f []string) bool {
			return len(f) > 0 && (f[0] == host || hashedNameOf(f[0], host))
		}
		path := filepath.Join(t.TempDir(), "known_hosts")
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := pinKnownHost(path, host, hostKey); err != nil {
			if b, rerr := os.ReadFile(path); rerr != nil || string(b) != file {
				t.Fatalf("key %q refused (%v), and the file changed: %q", hostKey, err, b)
			}
			if !strings.Contains(err.Error(), "key") {
				t.Fatalf("key %q: the error %q does not say what was wrong", hostKey, err)
			}
			return
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var kept, pinned []string
		for line := range strings.Lines(file) {
			if !names(strings.Fields(line)) {
				kept = append(kept, strings.TrimSuffix(line, "\n"))
			}
		}
		var gotKept []string
		for line := range strings.Lines(string(b)) {
			if names(strings.Fields(line)) {
				pinned = append(pinned, line)
			} else {
				gotKept = append(gotKept, strings.TrimSuffix(line, "\n"))
			}
		}
		if !slices.Equal(gotKept, kept) || len(pinned) != 1 {
			t.Fatalf("file %q pinned to %q: %q; want the lines %q and one for %s", file, hostKey, b, kept, host)
		}
		if named, current, err := knownHostLine(path, host, hostKey); err != nil || !named || !current {
			t.Fatalf("file %q pinned to %q: %q is not current: named %v current %v (%v)", file, hostKey, b, named, current, err)
		}
		if err := pinKnownHost(path, host, hostKey); err != nil {
			t.Fatalf("pinning %q again: %v", hostKey, err)
		}
		if again, err := os.ReadFile(path); err != nil || string(again) != string(b) {
			t.Fatalf("pinning %q again changed %q to %q (%v)", hostKey, b, again, err)
		}
	})
}
