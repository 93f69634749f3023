//go:build unix

package sigreset

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/internal/testenv"
)

// A process started with HUP ignored (nohup) runs its commands with HUP
// at its default: the command dies of it. The helper is this test binary,
// run under nohup.
func TestChildrenGetDefaultHUP(t *testing.T) {
	if os.Getenv("SIGRESET_HELPER") != "" {
		if os.Getenv("SIGRESET_HELPER") == "reset" {
			ForChildren()
		}
		out, _ := exec.Command("/bin/sh", "-c", "kill -HUP $$; echo survived").Output()
		os.Stdout.WriteString("child:" + strings.TrimSpace(string(out)) + "\n")
		return
	}
	nohup, err := exec.LookPath("nohup")
	testenv.RequirePeer(t, "nohup", err == nil)
	for mode, want := range map[string]string{"reset": "child:", "keep": "child:survived"} {
		cmd := exec.Command(nohup, os.Args[0], "-test.run=TestChildrenGetDefaultHUP")
		cmd.Env = append(os.Environ(), "SIGRESET_HELPER="+mode)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helper %s: %v %s", mode, err, out)
		}
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("helper %s: %q, want %q", mode, out, want)
		}
	}
}
