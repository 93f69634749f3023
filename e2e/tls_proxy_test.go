package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
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

// TestServesTLSItself deploys with no proxy in front: `gateway serve
// --tls-cert --tls-key` with a self-signed certificate, trusted through
// --ca-file by the agent (dialing wss:// straight to the gateway) and by
// `gateway proxy` (OpenSSH's ProxyCommand), and through client.Options'
// RootCAs by a Go program. A command's exit status and output, and 8 MiB
// each way through the Go client's SFTP, arrive unchanged.
func TestServesTLSItself(t *testing.T) {
	testenv.RequirePeer(t, "OpenSSH ssh", lookPath("ssh"))
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "privkey.pem")
	pool := writeSelfSigned(t, certFile, keyFile, "127.0.0.1")
	g := startGateway(t, "", "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(g.url, "https://") {
		t.Fatalf("gateway url %s", g.url)
	}
	g.roots = pool

	tok := g.token("agent", "edge")
	start(t, "agent edge", bin.agent, nil, "connect", "--gateway", g.url, "--ca-file", certFile, "--token", tok,
		"--host-id", "edge", "--state-dir", t.TempDir())
	g.waitConnected("edge", true, 30*time.Second)

	ctx := testCtx(t, 2*time.Minute)
	cfg := sshConfigVia(t, g, "edge", dir, g.url)
	// The ProxyCommand takes --ca-file from the environment.
	cmd := exec.CommandContext(ctx, "ssh", "-F", cfg, "edge", "echo", "tls-$((40+2))", ";", "exit", "3")
	cmd.Env = append(os.Environ(), "HOSTGATE_CA_FILE="+certFile)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || strings.TrimSpace(string(out)) != "tls-42" {
		t.Fatalf("ssh: %v %q", err, out)
	}
	// Without it, the proxy says what to do.
	cmd = exec.CommandContext(ctx, "ssh", "-F", cfg, "edge", "true")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "unknown authority") || !strings.Contains(string(out), "--ca-file FILE") {
		t.Errorf("ssh through a proxy that does not trust the certificate: %v %q, want the x509 error and --ca-file", err, out)
	}

	c, err := client.New(g.url, g.admin, g.clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Dial(ctx, "edge")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	res, err := h.Exec(ctx, []string{"sh", "-c", "uname -s; exit 4"}, hostgate.ExecOptions{})
	if err != nil || res.ExitCode != 4 || strings.TrimSpace(string(res.Stdout)) != "Linux" {
		t.Fatalf("Exec over the gateway's own TLS: %+v %v", res, err)
	}
	fsys, err := h.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 8<<20)
	_, _ = rand.Read(data)
	remote := filepath.Join(t.TempDir(), "remote.bin")
	if err := writeAll(ctx, fsys, remote, data); err != nil {
		t.Fatal(err)
	}
	back, err := readAll(ctx, fsys, remote)
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("8 MiB through SFTP over the gateway's own TLS came back changed (%d bytes): %v", len(back), err)
	}
}

// TestServesTLSItselfTwoCertificates deploys the gateway's own TLS with
// previews on a domain of their own, whose wildcard certificate the CA
// issued apart from the gateway's: `--tls-cert gw.pem,preview.pem`. A
// caller of the gateway's name gets its certificate, a caller of a
// preview subdomain the wildcard, by the name its hello asked for, and a
// subdomain preview opens through the ticket and cookie a browser gets.
func TestServesTLSItselfTwoCertificates(t *testing.T) {
	dir := t.TempDir()
	gwCert, gwKey := filepath.Join(dir, "gw.pem"), filepath.Join(dir, "gw.key")
	pvCert, pvKey := filepath.Join(dir, "preview.pem"), filepath.Join(dir, "preview.key")
	pool := writeSelfSigned(t, gwCert, gwKey, "127.0.0.1")
	writeSelfSigned(t, pvCert, pvKey, "*.preview.test")
	roots := pool.Clone()
	if pem, err := os.ReadFile(pvCert); err != nil || !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("%s: %v", pvCert, err)
	}
	g := startGateway(t, "", "--tls-cert", gwCert+","+pvCert, "--tls-key", gwKey+","+pvKey, "--preview-domain", "preview.test")
	g.roots = pool
	start(t, "agent edge", bin.agent, nil, "connect", "--gateway", g.url, "--ca-file", gwCert,
		"--token", g.token("agent", "edge"), "--host-id", "edge", "--state-dir", t.TempDir())
	g.waitConnected("edge", true, 30*time.Second)
	port := devServer(t)

	gwURL, err := url.Parse(g.url)
	if err != nil {
		t.Fatal(err)
	}
	// Every name resolves to the gateway, as DNS would; each TLS hello
	// asks for the request's host.
	var dialer net.Dialer
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, gwURL.Host)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(u string, c *http.Cookie, bearer bool) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", u, nil)
		if c != nil {
			req.AddCookie(c)
		}
		if bearer {
			req.Header.Set("Authorization", "Bearer "+g.admin)
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	res := get(g.url+"/preview-login?host=edge&port="+strconv.Itoa(port)+"&next=/", nil, true)
	if got := res.TLS.PeerCertificates[0].IPAddresses; len(got) != 1 || got[0].String() != "127.0.0.1" {
		t.Errorf("the gateway's own name got the certificate for %v %v", res.TLS.PeerCertificates[0].DNSNames, got)
	}
	loc, err := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusFound || err != nil || loc.Scheme != "https" || !strings.HasPrefix(loc.Host, strconv.Itoa(port)+"--edge.preview.test") {
		t.Fatalf("preview-login: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	res = get(loc.String(), nil, false)
	if got := res.TLS.PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != "*.preview.test" {
		t.Errorf("a preview subdomain got the certificate for %v, want *.preview.test's", got)
	}
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		if strings.HasSuffix(c.Name, "hostgate_preview") {
			cookie = c
		}
	}
	if res.StatusCode != http.StatusSeeOther || cookie == nil {
		t.Fatalf("ticket redeemed over TLS: %d, cookies %v", res.StatusCode, res.Cookies())
	}
	if res := get((&url.URL{Scheme: "https", Host: loc.Host, Path: "/"}).String(), cookie, false); res.StatusCode != http.StatusOK {
		t.Errorf("the preview over the wildcard certificate: %d", res.StatusCode)
	}
}

// TestBrowserTerminalGatewayTLS: Chromium logs in to a gateway serving TLS
// itself and types into a host's web terminal, whose WebSocket is wss://
// to the gateway, and whose agent's tunnel is too.
func TestBrowserTerminalGatewayTLS(t *testing.T) {
	testenv.RequirePeer(t, "Chromium with playwright-core (scripts/test installs both)", browserReady())
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "privkey.pem")
	pool := writeSelfSigned(t, certFile, keyFile, "127.0.0.1")
	g := startGateway(t, "", "--tls-cert", certFile, "--tls-key", keyFile)
	g.roots = pool
	start(t, "agent edge", bin.agent, nil, "connect", "--gateway", g.url, "--ca-file", certFile,
		"--token", g.token("agent", "edge"), "--host-id", "edge", "--state-dir", t.TempDir())
	g.waitConnected("edge", true, 30*time.Second)
	runBrowser(t, "terminal.mjs", "HOSTGATE_URL="+g.url, "HOSTGATE_TOKEN="+g.admin, "HOSTGATE_HOST=edge", "HOSTGATE_SELF_SIGNED=1")
}

// writeSelfSigned writes a self-signed certificate for names and its key
// as PEM files, and returns a pool that trusts it.
func writeSelfSigned(t *testing.T, certFile, keyFile string, names ...string) *x509.CertPool {
	t.Helper()
	c, k, leaf := testenv.SelfSigned(t, time.Now().Add(24*time.Hour), names...)
	if err := os.WriteFile(certFile, c, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, k, 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return pool
}
