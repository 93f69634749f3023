package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSandboxCannotReadANewAgentsKeys: a command of a sandbox cannot read
// the keys preamble (the agent's host key) the gateway writes to the stdin
// of the agent it starts there. The agent runs as the sandbox's uid and
// protected itself (PR_SET_DUMPABLE 0) only once its own code ran: a
// command that killed it and watched /proc opened the replacement's stdin
// (/proc/PID/fd/0) in that window and read its host key as the gateway
// wrote it, with which it could answer the next attachment as the host
// callers pin. The agent binary is now execute-only, which makes the
// kernel start it non-dumpable.
func TestSandboxCannotReadANewAgentsKeys(t *testing.T) {
	_, c, image := execGateway(t)
	ctx := testCtx(t, 5*time.Minute)
	e := provision(t, ctx, c, execRequest(image))
	cid := containerOf(t, e.ExecutionID)
	user := userOf(t, cid)

	steal := filepath.Join(t.TempDir(), "stealkeys")
	build := exec.Command("go", "build", "-o", steal, "./testdata/stealkeys")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build stealkeys: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(steal)
	if err != nil {
		t.Fatal(err)
	}
	hostile := func(stdin []byte, argv ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "docker", append([]string{"exec", "-i", "-u", user, cid}, argv...)...)
		cmd.Stdin = bytes.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q in the sandbox: %v\n%s", argv, err, out)
		}
		return string(out)
	}
	hostile(bin, "sh", "-c", "cat > /workspace/stealkeys && chmod 700 /workspace/stealkeys")

	// What every new agent is before its own code runs: a fresh exec of
	// the binary, here one that waits on its stdin (the guard's mode).
	if out := hostile(nil, "/workspace/stealkeys", "probe", "/opt/hostgate/agent"); !strings.HasPrefix(out, "denied: ") {
		t.Fatalf("a command opened the stdin of a fresh agent process: %q", out)
	}
	// The attack itself: the gateway attaches a new agent with the same
	// host key as the one the command killed.
	out := hostile(nil, "/workspace/stealkeys", "race", "/opt/hostgate/agent")
	if !strings.Contains(out, "killed agent") || !strings.Contains(out, "no stdin opened; new agents [") || strings.Contains(out, "new agents []") {
		t.Fatalf("a command that killed the agent and raced its replacement:\n%s", out)
	}
	t.Logf("in the sandbox: %s", out)
	if out := sh(t, ctx, c, e.ExecutionID, "echo alive"); out != "alive\n" {
		t.Fatalf("after the agent was killed: %q", out)
	}
}
