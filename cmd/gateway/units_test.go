package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/internal/testenv"
)

// unitExecStart is the ExecStart= line of a unit file under deploy/systemd.
func unitExecStart(t *testing.T, name string) (unit string, argv []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "systemd", name))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "ExecStart="); ok {
			return string(b), strings.Fields(v)
		}
	}
	t.Fatalf("%s: no ExecStart", name)
	return "", nil
}

// TestSystemdUnits: the README's sample units start the gateway with flags
// it takes (the agent's are checked in internal/agent), and systemd finds
// nothing wrong in either (an unknown key is only a warning to systemd,
// and a unit with a typo would run without that setting).
func TestSystemdUnits(t *testing.T) {
	_, argv := unitExecStart(t, "hostgate-gateway.service")
	if len(argv) < 2 || argv[0] != "/usr/local/bin/gateway" || argv[1] != "serve" {
		t.Fatalf("gateway unit's ExecStart: %q", argv)
	}
	if _, err := parseServeFlags("serve", stdio{out: io.Discard, err: io.Discard}, argv[2:], serveConfig{}); err != nil {
		t.Errorf("gateway unit's flags: %v", err)
	}
	// The commented alternatives (TLS on the gateway itself) must run too
	// when uncommented.
	unit, _ := unitExecStart(t, "hostgate-gateway.service")
	alts := 0
	for line := range strings.Lines(unit) {
		v, ok := strings.CutPrefix(strings.TrimSpace(line), "#ExecStart=/usr/local/bin/gateway serve ")
		if !ok {
			continue
		}
		alts++
		if _, err := parseServeFlags("serve", stdio{out: io.Discard, err: io.Discard}, strings.Fields(v), serveConfig{}); err != nil {
			t.Errorf("gateway unit's commented ExecStart: %v", err)
		}
	}
	if alts == 0 {
		t.Error("gateway unit: no commented ExecStart for TLS on the gateway itself")
	}
	analyze, err := exec.LookPath("systemd-analyze")
	testenv.RequirePeer(t, "systemd-analyze (Debian's systemd package)", err == nil)
	dir := t.TempDir()
	for _, u := range []struct{ name, bin string }{{"hostgate-gateway.service", "gateway"}, {"hostgate-agent.service", "agent"}} {
		unit, _ := unitExecStart(t, u.name)
		// verify wants the binary to exist.
		unit = strings.ReplaceAll(unit, "/usr/local/bin/"+u.bin, "/bin/true")
		path := filepath.Join(dir, u.name)
		if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(analyze, "verify", path).CombinedOutput()
		if err != nil || len(out) != 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", u.name, err, out)
		}
	}
}

// TestAgentUnitKeepsBackground: the agent unit says how to keep what
// --keep-background keeps. Its KillMode=mixed has systemd SIGKILL every
// process left in the unit's cgroup once the agent exits, so under it a
// stop, restart or crash of the agent killed what --keep-background had
// kept (VS Code's Remote-SSH server), where the README says nothing is
// killed when the agent is. The unit holds the commented alternative,
// KillMode=process, which systemd takes when uncommented.
func TestAgentUnitKeepsBackground(t *testing.T) {
	unit, _ := unitExecStart(t, "hostgate-agent.service")
	var alt string
	for line := range strings.Lines(unit) {
		if strings.TrimSpace(line) == "#KillMode=process" {
			alt = strings.Replace(unit, line, "KillMode=process\n", 1)
		}
	}
	if alt == "" {
		t.Fatal("agent unit: no commented KillMode=process for --keep-background, whose commands systemd's KillMode=mixed kills with the agent")
	}
	if !strings.Contains(unit, "--keep-background") {
		t.Error("agent unit: KillMode=process is not said to be for --keep-background")
	}
	analyze, err := exec.LookPath("systemd-analyze")
	testenv.RequirePeer(t, "systemd-analyze (Debian's systemd package)", err == nil)
	path := filepath.Join(t.TempDir(), "hostgate-agent.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(alt, "/usr/local/bin/agent", "/bin/true")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", path).CombinedOutput(); err != nil || len(out) != 0 {
		t.Errorf("systemd-analyze verify, KillMode=process uncommented: %v\n%s", err, out)
	}
}
