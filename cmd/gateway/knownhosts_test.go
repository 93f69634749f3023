//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/internal/testenv"
)

// TestProxyMendsKnownHostAfterReset: after `gateway host reset-key` and
// the host's enrollment with a new key, the known_hosts line `gateway
// cert` wrote names the old key while its certificate is fresh (cert makes
// no request then), and ssh refused the host with a host-key-changed
// warning until the renewal or `gateway cert --force`. `gateway proxy
// --known-hosts` gets the pinned key in the answer to the connection it
// makes anyway and rewrites the line before any of the host's bytes reach
// ssh, which reads the file only to check the key those bytes carry.
func TestProxyMendsKnownHostAfterReset(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	// Certificates live 10 minutes, as by default: a run right after
	// another finds its certificate fresh.
	base := startServe(t, dir, func(c *serveConfig) { c.CertTTL = 10 * time.Minute })
	token := tokenMaker(t, ctx, dir)
	agentTok, clientTok := token("--role", "agent", "--host", "Box"), token("--role", "client", "--host", "Box")
	pinned := func() string {
		t.Helper()
		c, err := client.New(base, clientTok, nil)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := c.Host(ctx, "Box")
		if err != nil {
			t.Fatal(err)
		}
		return rec.HostPublicKey
	}

	stopFirst := runAgent(t, ctx, base, agentTok)
	home := t.TempDir()
	keyFile, kh := filepath.Join(home, "hostgate_ed25519"), filepath.Join(home, "known_hosts")
	if err := os.WriteFile(kh, []byte("other.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	certArgs := []string{"cert", "--url", base, "--token", clientTok, "--key", keyFile, "--known-hosts", kh, "Box"}
	if _, err := cli(t, ctx, certArgs...); err != nil {
		t.Fatal(err)
	}
	oldKey := pinned()
	stopFirst()
	if _, err := cli(t, ctx, "host", "reset-key", "Box", "--state-dir", dir); err != nil {
		t.Fatal(err)
	}
	defer runAgent(t, ctx, base, agentTok)()
	newKey := pinned()
	if newKey == oldKey {
		t.Fatal("the second agent enrolled with the first one's key")
	}
	// The certificate is fresh: cert asks nothing and leaves the line.
	if _, err := cli(t, ctx, certArgs...); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(kh); !strings.Contains(string(b), "Box "+oldKey+"\n") {
		t.Fatalf("known_hosts %q, want the stale line for the test to mean anything (old %q new %q)", b, oldKey, newKey)
	}

	proxy := func() string {
		t.Helper()
		return proxyVersionLine(t, ctx, "--url", base, "--token", clientTok, "--known-hosts", kh, "Box")
	}
	msg := proxy()
	b, err := os.ReadFile(kh)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "other.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\nBox "+newKey+"\n" {
		t.Fatalf("known_hosts after a proxy run: %q, want Box's line to name the key the gateway now pins (%s), the other line kept", b, newKey)
	}
	if !strings.Contains(msg, "updated") {
		t.Errorf("proxy stderr %q, want it to say the line was updated", msg)
	}
	// Nothing changed: nothing written, nothing said.
	fi, _ := os.Stat(kh)
	if msg := proxy(); msg != "" {
		t.Errorf("proxy stderr with an up-to-date line: %q, want nothing", msg)
	}
	if fi2, _ := os.Stat(kh); !fi2.ModTime().Equal(fi.ModTime()) {
		t.Error("an up-to-date known_hosts file was rewritten")
	}

	// Real OpenSSH with the README's block, the line stale again: the
	// first connection after the reset works, with strict checking.
	sshPath, err := exec.LookPath("ssh")
	testenv.RequirePeer(t, "openssh (ssh)", err == nil)
	if err := pinKnownHost(kh, "Box", oldKey); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(home, "config")
	c := fmt.Sprintf(`Match host Box exec "%[1]s cert --key %[2]s --known-hosts %[3]s %%n"
Host Box
  User me
  ProxyCommand %[1]s proxy --known-hosts %[3]s %%n
  IdentityFile %[2]s
  CertificateFile %[2]s-%%n-cert.pub
  UserKnownHostsFile %[3]s
  StrictHostKeyChecking yes
  IdentitiesOnly yes
  BatchMode yes
`, os.Args[0], keyFile, kh)
	if err := os.WriteFile(config, []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, sshPath, "-F", config, "Box", "echo", "through")
	cmd.Env = append(os.Environ(), "HOSTGATE_TEST_BE_GATEWAY=1", "HOSTGATE_URL="+base, "HOSTGATE_TOKEN="+clientTok)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err != nil || string(out) != "through\n" {
		t.Fatalf("ssh right after a key reset: %q %v\n%s", out, err, stderr.String())
	}
}

// proxyVersionLine runs `gateway proxy` with args as ssh's ProxyCommand
// does, reads the host's SSH version line (by then a --known-hosts line
// is mended, or never will be) and hangs up; it returns the proxy's
// stderr.
func proxyVersionLine(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	// The run ends before a key exchange, which a direct path's memo
	// keeps (proxy_kexwatch.go): the test's, not the user's cache.
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	perr := make(chan error, 1)
	go func() {
		perr <- run(ctx, stdio{in: inR, out: outW, err: &stderr}, append([]string{"proxy"}, args...))
		_ = outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "SSH-2.0-") {
		t.Fatalf("the host's first line through the proxy: %q %v", line, err)
	}
	_ = inW.Close()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	if err := <-perr; err != nil {
		t.Fatalf("proxy: %v", err)
	}
	return stderr.String()
}
