package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestPinKnownHostConcurrently: the README's ssh_config runs `gateway cert
// --known-hosts` (and `gateway proxy --known-hosts`) for every ssh, all
// with one known_hosts file, so an ssh to many hosts at once (ansible, a
// shell loop with &) pins many hosts into it at once. Each run read the
// file, added its line and renamed its copy over it: the last rename won,
// and the other hosts' lines were gone, their ssh refused with "Host key
// verification failed". Every host's line, and the user's own, is kept.
func TestPinKnownHostConcurrently(t *testing.T) {
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
	const hosts = 16
	path := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(path, []byte("mine.example "+key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range hosts {
		wg.Go(func() {
			if err := pinKnownHost(path, fmt.Sprintf("host%d", i), key); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, h := range append([]string{"mine.example"}, func() (hs []string) {
		for i := range hosts {
			hs = append(hs, fmt.Sprintf("host%d", i))
		}
		return hs
	}()...) {
		if !strings.Contains(string(b), h+" "+key+"\n") {
			missing = append(missing, h)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d hosts pinned at once: the lines of %v are gone from the file:\n%s", hosts, missing, b)
	}
}
