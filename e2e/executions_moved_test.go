package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
)

// executionsOwner is the Docker executions owner of a gateway serving
// stateDir (an absolute path): cmd/gateway owner().
func executionsOwner(stateDir string) string {
	sum := sha256.Sum256([]byte(stateDir))
	return "hostgate-" + hex.EncodeToString(sum[:6])
}

// TestMovedStateDirKeepsItsExecutions: a gateway started from a moved
// state dir does not find its live execution under its own owner. It says
// so, naming the execution and the owner it runs under, and keeps its
// host and kept key: moved back, the state dir's gateway adopts it with
// the key its callers pinned. The moved one forgot both, logging only
// "forgot the host of an execution that ended while no gateway ran".
func TestMovedStateDirKeepsItsExecutions(t *testing.T) {
	g, c, image := execGateway(t)
	ctx := testCtx(t, 5*time.Minute)
	e := provision(t, ctx, c, execRequest(image))
	cid := containerOf(t, e.ExecutionID)
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", cid).Run() })
	sh(t, ctx, c, e.ExecutionID, "echo kept > kept.txt")
	g.stop()

	orig := g.stateDir
	moved := filepath.Join(t.TempDir(), "moved")
	t.Cleanup(func() { removeToolsVolumes(t, moved) })
	if err := os.Rename(orig, moved); err != nil {
		t.Fatal(err)
	}
	g.stateDir = moved
	g.restart("--docker", "on", "--agent-binary", bin.agent)
	warn := regexp.MustCompile(`level=WARN msg="executions of this state dir run on under another Docker executions owner[^"]*" component=executions executions="?\[` +
		regexp.QuoteMeta(e.ExecutionID) + `\]"? theirOwner=(\S+) theirStateDir=(\S+) owner=(\S+) .*fix="stop this gateway and start it with --state-dir (\S+),`)
	// Logged before "gateway serving", which restart waited for.
	m := warn.FindStringSubmatch(g.output())
	if m == nil {
		t.Fatalf("the gateway from the moved state dir did not warn of its execution running under another owner:\n%s", g.output())
	}
	if m[1] != executionsOwner(orig) || m[2] != orig || m[3] != executionsOwner(moved) || m[4] != orig {
		t.Fatalf("warning names owners %s (theirs, of %s) and %s, and the fix --state-dir %s; want %s (of %s), %s, and --state-dir %s:\n%s",
			m[1], m[2], m[3], m[4], executionsOwner(orig), orig, executionsOwner(moved), orig, m[0])
	}
	rec, err := g.hostRecord(e.ExecutionID)
	if err != nil || rec.Connected || rec.HostPublicKey != e.HostPublicKey {
		t.Fatalf("the moved gateway's record of the execution running elsewhere: %+v %v, want it kept, disconnected, with key %s", rec, err, e.HostPublicKey)
	}
	g.stop()
	if err := os.Rename(moved, orig); err != nil {
		t.Fatal(err)
	}
	g.stateDir = orig
	g.restart("--docker", "on", "--agent-binary", bin.agent)
	g.waitConnected(e.ExecutionID, true, 2*time.Minute)
	if rec, err := g.hostRecord(e.ExecutionID); err != nil || rec.HostPublicKey != e.HostPublicKey {
		t.Fatalf("host key after moving back: %+v %v, want %s", rec, err, e.HostPublicKey)
	}
	h, err := client.Dial(ctx, g.url, g.admin, e.ExecutionID)
	if err != nil {
		t.Fatalf("dial the adopted execution: %v", err)
	}
	defer h.Close()
	res, err := h.Exec(ctx, []string{"cat", "/workspace/kept.txt"}, hostgate.ExecOptions{})
	if err != nil || string(res.Stdout) != "kept\n" {
		t.Fatalf("adopted execution: %v %+v", err, res)
	}
	c2, err := client.New(g.url, g.admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Terminate(context.Background(), e.ExecutionID); err != nil {
		t.Fatal(err)
	}
}
