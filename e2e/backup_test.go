package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBackupRestoresTheGateway: `gateway backup` of a running gateway with
// an agent connected is a state dir on which a new gateway, on another
// port, is the same gateway: the agent (its token, its pinned CA) connects
// to it, its host key pin is the one from before, and the admin token
// from before works.
func TestBackupRestoresTheGateway(t *testing.T) {
	g := startGateway(t, "")
	agentDir := t.TempDir()
	agentTok := g.token("agent", "alpha")
	a := start(t, "agent alpha", bin.agent, nil, "connect", "--gateway", g.url, "--token", agentTok, "--host-id", "alpha", "--state-dir", agentDir)
	g.waitConnected("alpha", true, 30*time.Second)
	ctx := testCtx(t, 3*time.Minute)
	execEcho(t, ctx, g.url, g.admin, "alpha", "before")
	rec, err := g.hostRecord("alpha")
	if err != nil || !strings.HasPrefix(rec.HostKey, "SHA256:") {
		t.Fatalf("host alpha: %+v %v", rec, err)
	}

	out := filepath.Join(t.TempDir(), "backup")
	msg, err := exec.Command(bin.gateway, "backup", "--state-dir", g.stateDir, "--out", out).CombinedOutput()
	if err != nil {
		t.Fatalf("gateway backup of a running gateway: %v\n%s", err, msg)
	}
	execEcho(t, ctx, g.url, g.admin, "alpha", "during") // the gateway goes on
	a.stop()
	g.proc.stop()

	g2 := &gw{t: t, stateDir: out, admin: g.admin}
	g2.restart()
	if g2.url == g.url {
		t.Fatalf("the restored gateway took the old one's address %s", g.url)
	}
	start(t, "agent alpha (restored gateway)", bin.agent, nil, "connect", "--gateway", g2.url, "--token", agentTok, "--host-id", "alpha", "--state-dir", agentDir)
	g2.waitConnected("alpha", true, 60*time.Second)
	rec2, err := g2.hostRecord("alpha") // the admin token from the backup
	if err != nil {
		t.Fatal(err)
	}
	if rec2.HostKey != rec.HostKey {
		t.Fatalf("host alpha's pin on the restored gateway is %s, was %s", rec2.HostKey, rec.HostKey)
	}
	execEcho(t, ctx, g2.url, g.admin, "alpha", "restored")
	if o := g2.output(); strings.Contains(o, "new CA") {
		t.Fatalf("the restored gateway made a new CA:\n%s", o)
	}
}
