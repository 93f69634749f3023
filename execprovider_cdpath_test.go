//go:build unix

package hostgate_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/localexec"
)

// TestExecProviderRenameLinkToItselfWithCDPATH: a link renamed to itself,
// named once relative to the home directory and once absolute, is left
// alone as rename(2) leaves it, with CDPATH in the host's environment
// too: cd took the relative name's directory from CDPATH and printed it,
// so the two names did not compare equal, and the link was removed as if
// it were another in the way.
func TestExecProviderRenameLinkToItselfWithCDPATH(t *testing.T) {
	top := t.TempDir()
	home, elsewhere := filepath.Join(top, "home"), filepath.Join(top, "elsewhere")
	for _, d := range []string{filepath.Join(home, "a"), filepath.Join(elsewhere, "a")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(home, "a", "l")
	if err := os.Symlink("target", link); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CDPATH", elsewhere)
	p := hostgate.ExecProvider(homeTransport{&localexec.Transport{}, home})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Rename(ctx, "a/l", link); err != nil {
		t.Errorf("Rename(a/l, %s): %v", link, err)
	}
	if got, err := os.Readlink(link); got != "target" {
		t.Errorf("after the rename to itself, the link is %q, %v", got, err)
	}
}
