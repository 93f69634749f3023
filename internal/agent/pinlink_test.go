package agent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/gateway/sshca"
)

// A pin that is a symbolic link to a file that is not there (a state
// directory restored without its target, a pin kept on a volume not
// mounted) is refused, naming it: the pin could not be read, its write
// found the link in the way, and the agent read it again and wrote
// again, for ever, syncing a temporary file each time.
func TestPinCADanglingLink(t *testing.T) {
	state := t.TempDir()
	path := filepath.Join(state, GatewayCAFile)
	if err := os.Symlink(filepath.Join(t.TempDir(), "gone", "ca.pub"), path); err != nil {
		t.Fatal(err)
	}
	c := &connector{cfg: ConnectConfig{StateDir: state}, log: slog.New(slog.DiscardHandler)}
	ca, err := sshca.LoadOrCreate(filepath.Join(t.TempDir(), "ca"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.pinCA(ca.AuthorizedKey())
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("pin through a dangling link: %v, want an error naming %s as a link to a missing file", err, path)
	}
	if ents, _ := os.ReadDir(state); len(ents) != 1 {
		t.Fatalf("%d entries in the state dir, want the link alone", len(ents))
	}
}

// A pin that is not a regular file, or far larger than a key, is refused
// at once, naming it: a FIFO held the tunnel's attempt in its read for
// ever (the agent neither served nor stopped on SIGTERM), and a device
// such as /dev/zero was read into memory without bound.
func TestPinCANotAFile(t *testing.T) {
	ca, err := sshca.LoadOrCreate(filepath.Join(t.TempDir(), "ca"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		make func(path string) error
	}{
		{"fifo", func(path string) error { return syscall.Mkfifo(path, 0o600) }},
		{"device", func(path string) error { return os.Symlink(os.DevNull, path) }},
		// Sparse: a pin's read takes the size it is, not the disk.
		{"huge", func(path string) error { return os.WriteFile(path, nil, 0o600) }},
	} {
		state := t.TempDir()
		path := filepath.Join(state, GatewayCAFile)
		if err := tc.make(path); err != nil {
			t.Fatal(err)
		}
		want := "not a regular file"
		if tc.name == "huge" {
			if err := os.Truncate(path, 64<<20); err != nil {
				t.Fatal(err)
			}
			want = "larger than"
		}
		c := &connector{cfg: ConnectConfig{StateDir: state}, log: slog.New(slog.DiscardHandler)}
		done := make(chan error, 1)
		go func() {
			_, err := c.pinCA(ca.AuthorizedKey())
			done <- err
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s as the pin: %v, want it refused: %s", tc.name, err, want)
			}
		case <-ctx.Done():
			if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = w.Close() // the FIFO's read returns, and the goroutine ends
			}
			t.Errorf("%s as the pin: pinCA never returned", tc.name)
			<-done
		}
		cancel()
	}
}
