package agent

import (
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// caKey is a new ed25519 public key, to stand for a trusted CA.
func caKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestStateDirWritableByOthersTightened: a state directory that group or
// others may write (made by hand under umask 002, or 0777) has their
// write permission taken off as the agent starts, saying so: whoever
// could write it could swap the host key for one they hold, or plant the
// pin before the first enrollment, and the agent used it as it found it.
// connect and serve alike.
func TestStateDirWritableByOthersTightened(t *testing.T) {
	for _, cmd := range []string{"connect", "serve"} {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		logs := &testenv.LogBuffer{}
		log := slog.New(slog.NewTextHandler(logs, nil))
		var err error
		if cmd == "connect" {
			_, err = newConnector(&ConnectConfig{GatewayURL: "https://127.0.0.1:1", Token: "t", StateDir: dir, Logger: log})
		} else {
			var srv interface{ Close() error }
			srv, err = NewServer(&ServeConfig{StateDir: dir, Logger: log, HostID: "h1", TrustedCAs: []ssh.PublicKey{caKey(t)}})
			if err == nil {
				_ = srv.Close()
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		st, serr := os.Stat(dir)
		if serr != nil {
			t.Fatal(serr)
		}
		if got := st.Mode().Perm(); got != 0o755 {
			t.Errorf("%s: state dir mode %#o after start, want 0755 (group and others' write taken off)", cmd, got)
		}
		if !strings.Contains(logs.String(), dir) || !strings.Contains(logs.String(), "writable") {
			t.Errorf("%s: nothing logged of the state dir's permissions:\n%s", cmd, logs)
		}
	}
}

// TestStateDirSharedRefused: a state dir with the sticky bit is a shared
// directory (--state-dir /tmp): the agent refuses it, naming the fix,
// and leaves its mode alone. Taking others' write off, as for a directory
// of the agent's own, would have broken /tmp for every user of a machine
// whose agent runs as root.
func TestStateDirSharedRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	_, err := newConnector(&ConnectConfig{GatewayURL: "https://127.0.0.1:1", Token: "t", StateDir: dir})
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "--state-dir") {
		t.Errorf("a sticky, world-writable state dir: %v, want it refused naming --state-dir", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&(os.ModeSticky|os.ModePerm) != os.ModeSticky|0o777 {
		t.Errorf("the shared dir's mode changed to %v", st.Mode())
	}
}
