package e2e

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

var devSSHRE = regexp.MustCompile(`(?m)^\s*ssh:\s+(.+)$`)

// TestDevSSHCommand runs the README's quick start: the ssh command
// `gateway dev` prints reaches host local through `gateway proxy`, with
// the admin token in ssh's environment, not on the proxy's command line.
func TestDevSSHCommand(t *testing.T) {
	testenv.RequirePeer(t, "OpenSSH ssh", lookPath("ssh"))
	dev := startDev(t)
	line := dev.waitFor(devSSHRE, 30*time.Second)[1]
	proxy, _, _ := strings.Cut(line[strings.Index(line, "ProxyCommand="):], " local")
	if !strings.HasPrefix(line, "HOSTGATE_TOKEN=") || strings.Contains(proxy, "--token") || strings.Contains(proxy, dev.admin) {
		t.Errorf("printed ssh command %q: want the token in HOSTGATE_TOKEN, not in the ProxyCommand", line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", "-c", line+" 'echo quick; echo start'").CombinedOutput()
	if err != nil || string(out) != "quick\nstart\n" {
		t.Fatalf("the printed ssh command: %v %q", err, out)
	}
}
