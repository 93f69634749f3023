//go:build linux

package sshlayer

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/hostgate/hostgate/internal/durable"
)

func TestLoadOrCreateHostKey(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state", "agent")
	path := filepath.Join(dir, "ssh_host_ed25519_key")
	k1, err := LoadOrCreateHostKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if k1.PublicKey().Type() != "ssh-ed25519" {
		t.Errorf("key type %s, want ssh-ed25519", k1.PublicKey().Type())
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v %v, want 0600", st.Mode(), err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("key dir mode %v %v, want 0700", st.Mode(), err)
	}
	b, _ := os.ReadFile(path)
	if !bytes.HasPrefix(b, []byte("-----BEGIN OPENSSH PRIVATE KEY-----")) {
		t.Errorf("key file is not OpenSSH PEM: %.40q", b)
	}
	k2, err := LoadOrCreateHostKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k1.PublicKey().Marshal(), k2.PublicKey().Marshal()) {
		t.Fatal("second load returned another key")
	}
	// No temporary files left behind.
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("dir holds %d entries, want only the key", len(ents))
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateHostKey(path); err == nil {
		t.Error("world-readable host key accepted")
	}
	if err := os.WriteFile(path+"2", []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateHostKey(path + "2"); err == nil {
		t.Error("garbage host key accepted")
	}
}

// TestLoadOrCreateHostKeyConcurrent: creators racing on a new path all end
// up with the same key.
func TestLoadOrCreateHostKeyConcurrent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "k")
	var wg sync.WaitGroup
	keys := make([][]byte, 8)
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := LoadOrCreateHostKey(path)
			if err != nil {
				t.Error(err)
				return
			}
			keys[i] = k.PublicKey().Marshal()
		}()
	}
	wg.Wait()
	for i := range keys {
		if !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("creator %d got another key", i)
		}
	}
}

// TestCreatedHostKeyIsDurable: a new host key's name is synced to disk
// once it is in place. The key was synced, its directory was not: after
// a power loss the agent could find no key, make another, and be refused
// by its gateway, which pinned the first (until an admin resets it). A
// power loss cannot be simulated here: durable.Synced says that the
// directory was synced, and after the link.
func TestCreatedHostKeyIsDurable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "host_key")
	var synced []string
	durable.Synced = func(d string) {
		if _, err := os.Stat(path); err == nil {
			synced = append(synced, d)
		}
	}
	defer func() { durable.Synced = nil }()
	if _, err := LoadOrCreateHostKey(path); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(synced, dir) {
		t.Fatalf("%s was not synced once the new host key was linked into it: a power loss can lose the key", dir)
	}
}

// TestHostKeyNotAFile: a host key path that names a FIFO is refused at
// once, naming what it is. Opening it waited for a writer that never
// came: the agent hung at its start, before it served or handled a
// signal's stop (systemctl stop waited for its SIGKILL).
func TestHostKeyNotAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host_key")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := LoadOrCreateHostKey(path)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("a FIFO as host key: %v, want it refused as not a regular file", err)
		}
	case <-testCtx(t).Done():
		// Let the open return, so that the goroutine ends.
		if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = w.Close()
		}
		<-done
		t.Fatal("loading a FIFO as host key never returned")
	}
}

// TestHostKeyDanglingLink: a host key path that is a symbolic link to a
// file that is not there (a state directory restored without its target,
// a key on a volume not mounted) is refused saying so and what to do. It
// said "no such file or directory" of a name that ls shows.
func TestHostKeyDanglingLink(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host_key")
	target := filepath.Join(t.TempDir(), "gone", "host_key")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	_, err := LoadOrCreateHostKey(path)
	if err == nil || !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), target) || !strings.Contains(err.Error(), "remove the link") {
		t.Fatalf("a dangling link as host key: %v, want it named as a link to %s and the fix", err, target)
	}
	if _, err := os.Lstat(target); err == nil {
		t.Error("a key was made at the link's target")
	}
}
