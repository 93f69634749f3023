package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// TestThroughTLSProxy deploys as the README does: the gateway behind a
// TLS-terminating reverse proxy, the agent dialing wss:// out to it, and
// OpenSSH reaching the host through `gateway proxy` over wss:// too. Both
// ends write their WebSocket client frames into TLS (bytestream's
// tlsFrames), the agent for what the host sends, `gateway proxy` for what
// ssh sends: a command's exit status and output, and 20 MiB each way by
// sftp, arrive unchanged.
func TestThroughTLSProxy(t *testing.T) {
	testenv.RequirePeer(t, "OpenSSH ssh/sftp", lookPath("ssh") && lookPath("sftp"))
	g := startGateway(t, "")
	back, err := url.Parse(g.url)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		paths []string
	)
	rp := httputil.NewSingleHostReverseProxy(back)
	front := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	// Both processes trust the proxy's certificate (Go reads
	// SSL_CERT_FILE for its roots).
	dir := t.TempDir()
	ca := filepath.Join(dir, "proxy-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	trust := "SSL_CERT_FILE=" + ca

	tok := g.token("agent", "edge")
	start(t, "agent edge", bin.agent, []string{trust}, "connect", "--gateway", front.URL, "--token", tok,
		"--host-id", "edge", "--state-dir", t.TempDir())
	g.waitConnected("edge", true, 30*time.Second)

	ctx := testCtx(t, 2*time.Minute)
	cfg := sshConfigVia(t, g, "edge", dir, front.URL)
	ssh := func(name string, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), trust) // for the ProxyCommand
		return cmd
	}
	out, err := ssh("ssh", "-F", cfg, "edge", "echo", "tls-$((40+2))", ";", "exit", "3").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || strings.TrimSpace(string(out)) != "tls-42" {
		t.Fatalf("ssh: %v %q", err, out)
	}

	local := filepath.Join(dir, "up.bin")
	data := make([]byte, 20<<20)
	_, _ = rand.Read(data)
	if err := os.WriteFile(local, data, 0o600); err != nil {
		t.Fatal(err)
	}
	remote := filepath.Join(t.TempDir(), "remote.bin")
	cmd := ssh("sftp", "-F", cfg, "-b", "-", "edge")
	cmd.Stdin = strings.NewReader(fmt.Sprintf("put %s %s\nget %s %s.back\n", local, remote, remote, local))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sftp: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(remote); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("sftp upload through the TLS proxy changed the bytes: %v", err)
	}
	if b, err := os.ReadFile(local + ".back"); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("sftp download through the TLS proxy changed the bytes: %v", err)
	}

	// Both WebSockets went through the proxy: the agent's tunnel and the
	// ProxyCommand's.
	mu.Lock()
	seen := strings.Join(paths, " ")
	mu.Unlock()
	for _, want := range []string{"/v1/agents/connect", "/v1/hosts/edge/ssh"} {
		if !strings.Contains(seen, want) {
			t.Errorf("the TLS proxy saw %q, no %s", seen, want)
		}
	}
}
