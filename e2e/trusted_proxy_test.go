package e2e

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/internal/testenv"
)

// xffTransport adds an X-Forwarded-For of its own to every request, as a
// client spoofing its address would.
type xffTransport struct{ xff string }

func (x xffTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Forwarded-For", x.xff)
	return http.DefaultTransport.RoundTrip(r)
}

// TestTrustedProxyNamesTheClient runs the README's deployment with a real
// reverse proxy: a Go httputil.ReverseProxy on 127.0.0.2 in front of a
// gateway started with --trusted-proxy 127.0.0.2, which appends the
// client's address to X-Forwarded-For. OpenSSH's ssh through `gateway
// proxy` dialing the proxy sees the proxy's client (127.0.0.1, port 0:
// X-Forwarded-For carries none) in SSH_CONNECTION and SSH_CLIENT, not the
// proxy; and an X-Forwarded-For a client sends itself is not believed,
// straight to the gateway (its peer is no trusted proxy) nor through the
// proxy (whose own entry, the rightmost, is the one believed).
func TestTrustedProxyNamesTheClient(t *testing.T) {
	testenv.RequirePeer(t, "OpenSSH ssh", lookPath("ssh"))
	g := startGateway(t, "", "--trusted-proxy", "127.0.0.2")
	g.startAgent("alpha", "")
	ctx := testCtx(t, 2*time.Minute)

	back, err := url.Parse(g.url)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(back)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// The proxy reaches the gateway from 127.0.0.2, the address it trusts.
	tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext
	rp.Transport = tr
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		testenv.RequirePeer(t, "127.0.0.2 on loopback ("+err.Error()+")", false)
	}
	srv := &http.Server{Handler: rp}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		tr.CloseIdleConnections()
	})
	front := "http://" + ln.Addr().String()

	// OpenSSH through the proxy: the forwarded client, port 0.
	cfg := sshConfigVia(t, g, "alpha", t.TempDir(), front)
	out, err := exec.CommandContext(ctx, "ssh", "-F", cfg, "alpha", `echo "$SSH_CONNECTION|$SSH_CLIENT"`).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh through the proxy: %v %q", err, out)
	}
	end := g.agentEnd("alpha")
	if got, want := strings.TrimSpace(string(out)), "127.0.0.1 0 "+end+"|127.0.0.1 0 "+strings.Fields(end)[1]; got != want {
		t.Errorf("ssh through the trusted proxy: SSH_CONNECTION|SSH_CLIENT = %q, want %q (the proxy's client)", got, want)
	}

	// The Go client, sending an X-Forwarded-For of its own.
	caller := func(base string) string {
		t.Helper()
		c, err := client.New(base, g.admin, &client.Options{HTTPClient: &http.Client{Transport: xffTransport{"203.0.113.7"}}})
		if err != nil {
			t.Fatal(err)
		}
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		h, err := c.Dial(dctx, "alpha")
		if err != nil {
			t.Fatalf("dial through %s: %v", base, err)
		}
		defer h.Close()
		res, err := h.Exec(dctx, []string{"sh", "-c", `echo "$SSH_CONNECTION"`}, hostgate.ExecOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(res.Stdout))
		if len(f) != 4 {
			t.Fatalf("SSH_CONNECTION %q", res.Stdout)
		}
		return f[0] + " " + f[1]
	}
	// Straight to the gateway: its peer, 127.0.0.1, is no trusted proxy,
	// so the header is not read; the caller is the peer, with its port.
	if got := caller(g.url); !strings.HasPrefix(got, "127.0.0.1 ") || got == "127.0.0.1 0" {
		t.Errorf("a spoofed X-Forwarded-For straight to the gateway: the caller is %q, want the peer 127.0.0.1 and its port", got)
	}
	// Through the proxy, which appends its client: 203.0.113.7 is the
	// client's word, left of the entry the trusted proxy wrote.
	if got := caller(front); got != "127.0.0.1 0" {
		t.Errorf("a spoofed X-Forwarded-For through the proxy: the caller is %q, want 127.0.0.1 0, the proxy's own entry", got)
	}
}
