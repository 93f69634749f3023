package agent

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
