package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A --state-dir the agent cannot make (a parent it may not write: a
// service's User= without systemd's StateDirectory=, or a file in the
// way) names the flag and the fix, where connect said "agent: state dir:
// mkdir …" and serve "sshlayer: host key dir: mkdir …".
func TestStateDirNotMadeNamesTheFlag(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(file, "state")
	_, err := newConnector(&ConnectConfig{GatewayURL: "http://127.0.0.1:1", Token: "t", StateDir: dir})
	if err == nil || !strings.Contains(err.Error(), "--state-dir") || !strings.Contains(err.Error(), "StateDirectory=") {
		t.Errorf("connect: %v, want an error naming --state-dir and the fix", err)
	}
	_, err = NewServer(&ServeConfig{StateDir: dir, AuthorizedKeys: nil})
	if err == nil || !strings.Contains(err.Error(), "--state-dir") || !strings.Contains(err.Error(), "StateDirectory=") {
		t.Errorf("serve: %v, want an error naming --state-dir and the fix", err)
	}
}
