package e2e

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/sshlayer"
)

// TestImpostorAgent: an agent with the same host id and a valid agent
// token but another host key is refused with a clear reason and keeps
// retrying, while the real agent keeps serving; after `gateway host
// reset-key` the next enrollment pins the new key.
func TestImpostorAgent(t *testing.T) {
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	ctx := testCtx(t, 3*time.Minute)
	rec, err := g.hostRecord("alpha")
	if err != nil {
		t.Fatal(err)
	}
	realPin := rec.HostKey

	// A session opened before the impostor shows up, used during and after.
	h, err := client.Dial(ctx, g.url, g.admin, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()

	impDir := t.TempDir()
	// A refused agent waits its longest backoff before it asks again: 15
	// to 30 s by default, and this test waits for a second refusal.
	impArgs := []string{"connect", "--gateway", g.url, "--token", g.token("agent", "alpha"), "--host-id", "alpha", "--state-dir", impDir, "--max-backoff", "1s"}
	imp := start(t, "impostor alpha", bin.agent, nil, impArgs...)
	// The reason is in the impostor's log (once: it logs a refusal again
	// only when the reason changes), and it retries: the gateway logs the
	// refusal once a spell, and counts two.
	refused := regexp.MustCompile(`(?s)host_key_mismatch.*pinned to host key ` + regexp.QuoteMeta(realPin) + `.*reset-key alpha`)
	imp.waitFor(refused, 60*time.Second)
	g.waitFor(regexp.MustCompile(`agent refused: host key differs`), 60*time.Second)
	waitMetricAtLeast(t, g, `hostgate_agent_refusals_total{reason="key_mismatch"}`, 2)

	for i, hh := range []*hostgate.Host{h, nil} {
		if hh == nil {
			execEcho(t, ctx, g.url, g.admin, "alpha", "new-session-during-impostor")
			continue
		}
		res, err := hh.Exec(ctx, []string{"echo", "during"}, hostgate.ExecOptions{})
		if err != nil || string(res.Stdout) != "during\n" {
			t.Fatalf("exec %d during the impostor's attempts: %+v %v", i, res, err)
		}
	}
	if rec, err := g.hostRecord("alpha"); err != nil || rec.HostKey != realPin || !rec.Connected {
		t.Fatalf("host record while the impostor retries: %+v %v (want pin %s, connected)", rec, err, realPin)
	}

	// An admin resets the pin; the impostor, restarted, is accepted and its
	// key pinned (it is the reinstalled machine now).
	imp.stop()
	if out, err := exec.Command(bin.gateway, "host", "reset-key", "alpha", "--state-dir", g.stateDir).CombinedOutput(); err != nil {
		t.Fatalf("gateway host reset-key: %v %s", err, out)
	}
	imp2 := start(t, "impostor alpha (after reset)", bin.agent, nil, impArgs...)
	imp2.waitFor(regexp.MustCompile(`msg="tunnel up"`), 60*time.Second)
	impKey, err := sshlayer.LoadOrCreateHostKey(filepath.Join(impDir, "host_key"))
	if err != nil {
		t.Fatal(err)
	}
	want := ssh.FingerprintSHA256(impKey.PublicKey())
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec, err := g.hostRecord("alpha")
		if err == nil && rec.HostKey == want && rec.Connected {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after reset-key the new agent's key %s is not pinned: %+v %v", want, rec, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	execEcho(t, ctx, g.url, g.admin, "alpha", "new-pin")
}

// apiError decodes the gateway's JSON error body.
func apiError(t *testing.T, body []byte) (code, msg string) {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("want a JSON error {error:{code,message}}, got %q (%v)", body, err)
	}
	return e.Error.Code, e.Error.Message
}

// TestTokenScopes: a client token reaches only its host, an agent token
// reaches none, bad or missing tokens are 401 JSON, and a source that
// keeps failing gets 429.
func TestTokenScopes(t *testing.T) {
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	g.startAgent("beta", "")
	ctx := testCtx(t, 2*time.Minute)
	tokA := g.token("client", "alpha")
	agentTok := g.token("agent", "alpha")

	// Host A: everything works.
	if st, b := g.api("GET", "/v1/hosts/alpha", tokA, nil); st != http.StatusOK {
		t.Fatalf("client A on host A: %d %s", st, b)
	}
	execEcho(t, ctx, g.url, tokA, "alpha", "mine")

	// Host B: not found (or forbidden), for the record, certificates and
	// the SSH relay; and for a host that does not exist, the same answer
	// (a client cannot probe which hosts exist).
	key, err := sshlayer.GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"beta", "nosuchhost"} {
		for _, req := range []struct {
			method, path string
			body         any
		}{
			{"GET", "/v1/hosts/" + id, nil},
			{"POST", "/v1/hosts/" + id + "/certificates", map[string]string{"publicKey": key.PublicKey}},
		} {
			st, b := g.api(req.method, req.path, tokA, req.body)
			if st != http.StatusNotFound && st != http.StatusForbidden {
				t.Fatalf("client A: %s %s: %d %s, want 404 or 403", req.method, req.path, st, b)
			}
			apiError(t, b)
			if strings.Contains(string(b), "BEGIN") || strings.Contains(string(b), "cert") {
				t.Fatalf("client A: %s %s leaked something: %s", req.method, req.path, b)
			}
		}
		c, _ := client.New(g.url, tokA, nil)
		conn, err := c.DialSSH(ctx, id)
		var he *bytestream.HandshakeError
		if err == nil {
			conn.Close()
			t.Fatalf("client A opened an SSH stream to host %s", id)
		}
		if !errors.As(err, &he) || (he.StatusCode != http.StatusNotFound && he.StatusCode != http.StatusForbidden) {
			t.Fatalf("client A ssh to %s: %v, want a 404/403 handshake error", id, err)
		}
		if _, err := client.Dial(ctx, g.url, tokA, id); err == nil {
			t.Fatalf("client.Dial with client A to host %s succeeded", id)
		}
	}

	// The list shows only A.
	st, b := g.api("GET", "/v1/hosts", tokA, nil)
	var list struct {
		Hosts []client.HostRecord `json:"hosts"`
	}
	if st != http.StatusOK || json.Unmarshal(b, &list) != nil || len(list.Hosts) != 1 || list.Hosts[0].ID != "alpha" {
		t.Fatalf("client A lists: %d %s, want only alpha", st, b)
	}
	if st, b := g.api("GET", "/v1/hosts", g.admin, nil); st != http.StatusOK || !strings.Contains(string(b), `"beta"`) {
		t.Fatalf("admin lists: %d %s", st, b)
	}

	// An agent token reaches no host and cannot list.
	for _, path := range []string{"/v1/hosts", "/v1/hosts/alpha"} {
		st, b := g.api("GET", path, agentTok, nil)
		if st != http.StatusForbidden {
			t.Fatalf("agent token GET %s: %d %s, want 403", path, st, b)
		}
		apiError(t, b)
	}

	// Bad and missing tokens: 401 JSON with a challenge.
	for _, tok := range []string{"", "not-a-token", tokA + "x", strings.Repeat("A", 4096)} {
		req, _ := http.NewRequestWithContext(ctx, "GET", g.url+"/v1/hosts", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body [4096]byte
		n, _ := res.Body.Read(body[:])
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("token %.20q: %d %s, want 401 with WWW-Authenticate", tok, res.StatusCode, body[:n])
		}
		if code, _ := apiError(t, body[:n]); code != "unauthorized" {
			t.Fatalf("token %.20q: code %q", tok, code)
		}
	}

	// Many failures from one source: 429 (bounded loop), and then even a
	// good token from that source waits.
	got429 := false
	for i := 0; i < 100 && !got429; i++ {
		st, b := g.api("GET", "/v1/hosts", "bad-token", nil)
		switch st {
		case http.StatusTooManyRequests:
			if code, _ := apiError(t, b); code != "rate_limited" {
				t.Fatalf("429 code %q", code)
			}
			got429 = true
		case http.StatusUnauthorized:
		default:
			t.Fatalf("bad token attempt %d: %d %s", i, st, b)
		}
	}
	if !got429 {
		t.Fatal("100 failed authentications from one source never got 429")
	}
	if st, _ := g.api("GET", "/v1/hosts", tokA, nil); st != http.StatusTooManyRequests {
		t.Fatalf("a rate-limited source with a good token: %d, want 429", st)
	}
}

// TestLoginForm: the browser login counts wrong tokens against their
// source like the API does, and another site's form cannot log a browser
// in.
func TestLoginForm(t *testing.T) {
	g := startGateway(t, "")
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	login := func(token string, hdr http.Header) *http.Response {
		t.Helper()
		req, err := http.NewRequest("POST", g.url+"/login", strings.NewReader(url.Values{"token": {token}, "next": {"/"}}.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			req.Header[k] = v
		}
		res, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	client := g.token("client", "alpha")
	if res := login(client, http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}}); res.StatusCode != http.StatusForbidden || len(res.Cookies()) != 0 {
		t.Fatalf("a cross-site login form: %d with cookies %v, want 403 and none", res.StatusCode, res.Cookies())
	}
	if res := login(client, http.Header{"Sec-Fetch-Site": {"same-origin"}}); res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Fatalf("the login form: %d with cookies %v, want 303 and the session cookie", res.StatusCode, res.Cookies())
	}
	limited := false
	for i := 0; i < 100 && !limited; i++ {
		if res := login("hg_wrong", nil); len(res.Cookies()) != 0 {
			t.Fatalf("a wrong token logged in: %v", res.Cookies())
		}
		limited = func() bool { st, _ := g.api("GET", "/v1/hosts", g.admin, nil); return st == http.StatusTooManyRequests }()
	}
	if !limited {
		t.Fatal("100 wrong tokens in the login form never rate-limited their source")
	}
}

// TestCertificatesRefused: the agent accepts only certificates of the
// gateway's CA, valid now, for its own host id; a plain key is refused.
func TestCertificatesRefused(t *testing.T) {
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	g.startAgent("beta", "")
	ctx := testCtx(t, 2*time.Minute)
	c, err := client.New(g.url, g.admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Host(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(g.stateDir, "ca_key"))
	if err != nil {
		t.Fatal(err)
	}
	gatewayCA, err := ssh.ParsePrivateKey(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	otherCA, err := ssh.NewSignerFromKey(otherPriv)
	if err != nil {
		t.Fatal(err)
	}
	key, err := sshlayer.GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	sign := func(ca ssh.Signer, principal string, after, before time.Time) []byte {
		cert := &ssh.Certificate{
			Key: key.Signer.PublicKey(), CertType: ssh.UserCert, KeyId: "e2e",
			ValidPrincipals: []string{principal},
			ValidAfter:      uint64(after.Unix()), ValidBefore: uint64(before.Unix()),
			Permissions: ssh.Permissions{Extensions: map[string]string{"permit-pty": ""}},
		}
		if err := cert.SignCert(rand.Reader, ca); err != nil {
			t.Fatal(err)
		}
		return ssh.MarshalAuthorizedKey(cert)
	}
	betaCert, err := c.Certificate(ctx, "beta", key.PublicKey) // principal beta
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	connect := func(cert []byte) error {
		conn, err := c.DialSSH(ctx, "alpha")
		if err != nil {
			t.Fatal(err)
		}
		sc, err := sshlayer.Connect(ctx, conn, sshlayer.Auth{Signer: key.Signer, Certificate: cert, HostKey: rec.HostKey})
		if err != nil {
			conn.Close()
			return err
		}
		defer sc.Close()
		// Prove the session is real.
		s, err := sc.SSH().NewSession()
		if err != nil {
			return err
		}
		defer s.Close()
		out, err := s.Output("echo in")
		if err != nil || string(out) != "in\n" {
			t.Fatalf("accepted session does not run commands: %q %v", out, err)
		}
		return nil
	}

	// Controls: a certificate the test signs with the gateway's CA file is
	// accepted, so each refusal below is about the one thing changed.
	if err := connect(sign(gatewayCA, "alpha", now.Add(-time.Minute), now.Add(5*time.Minute))); err != nil {
		t.Fatalf("a valid certificate from the gateway CA was refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		cert []byte
	}{
		{"another CA", sign(otherCA, "alpha", now.Add(-time.Minute), now.Add(5*time.Minute))},
		{"expired", sign(gatewayCA, "alpha", now.Add(-2*time.Hour), now.Add(-time.Hour))},
		{"not yet valid", sign(gatewayCA, "alpha", now.Add(time.Hour), now.Add(2*time.Hour))},
		{"principal of another host (signed by the gateway for beta)", []byte(betaCert.Certificate)},
		{"principal of another host (signed by the CA file)", sign(gatewayCA, "beta", now.Add(-time.Minute), now.Add(5*time.Minute))},
		{"plain key, no certificate", nil},
	} {
		err := connect(tc.cert)
		if err == nil {
			t.Errorf("%s: accepted by the agent", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), "unable to authenticate") {
			t.Errorf("%s: refused, but not as an authentication failure: %v", tc.name, err)
		}
	}
	// The agent still serves after the refusals.
	execEcho(t, ctx, g.url, g.admin, "alpha", "after-refusals")
}

// rawWebSocket does a WebSocket handshake by hand on a TCP connection, so
// the test can then send bytes no WebSocket library would (a malformed
// frame). It returns the connection after the 101 answer.
func rawWebSocket(t *testing.T, gwURL, path, token string) (net.Conn, *bufio.Reader) {
	t.Helper()
	addr := strings.TrimPrefix(gwURL, "http://")
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
		"Authorization: Bearer " + token + "\r\n\r\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("raw websocket handshake: %v %v", res, err)
	}
	return conn, br
}

// readsUntilClosed reads from r until the peer closes; it fails the test
// if that takes 30 s (the read deadline), i.e. the gateway kept the
// connection open.
func readsUntilClosed(t *testing.T, what string, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var buf [4096]byte
	for {
		_, err := br.Read(buf[:])
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("%s: the gateway kept the connection open", what)
		}
		return
	}
}

// TestBadFramesCloseOnlyTheirConnection: an oversized message or a
// malformed frame on a caller's SSH WebSocket, and garbage instead of
// yamux on an agent tunnel, end that connection only.
func TestBadFramesCloseOnlyTheirConnection(t *testing.T) {
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	g.startAgent("beta", "")
	ctx := testCtx(t, 2*time.Minute)

	// Sessions open on both hosts throughout.
	var live []*hostgate.Host
	for _, id := range []string{"alpha", "beta"} {
		h, err := client.Dial(ctx, g.url, g.admin, id)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		live = append(live, h)
	}
	check := func(when string) {
		t.Helper()
		for i, h := range live {
			res, err := h.Exec(ctx, []string{"echo", when}, hostgate.ExecOptions{})
			if err != nil || string(res.Stdout) != when+"\n" {
				t.Fatalf("live session %d %s: %+v %v", i, when, res, err)
			}
		}
		execEcho(t, ctx, g.url, g.admin, "alpha", when)
		execEcho(t, ctx, g.url, g.admin, "beta", when)
	}

	// 1. A message larger than the gateway's 256 KiB read limit. It is
	// the start of a valid SSH packet (after a valid banner) that needs
	// more bytes than the limit lets through, so the agent's SSH server
	// keeps waiting and only the gateway's limit can end the connection.
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+g.admin)
	wsURL := "ws" + strings.TrimPrefix(g.url, "http") + "/v1/hosts/alpha/ssh"
	ws, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := ws.Write(wctx, websocket.MessageBinary, []byte("SSH-2.0-e2e\r\n")); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 300<<10)
	binary.BigEndian.PutUint32(big, 256<<10)         // x/crypto/ssh's largest packet
	big[4] = 4                                       // padding length
	_ = ws.Write(wctx, websocket.MessageBinary, big) // may fail once the gateway closes
	for {
		_, _, err := ws.Read(wctx)
		if err == nil {
			continue // the agent's banner and KEXINIT
		}
		if wctx.Err() != nil {
			t.Fatal("oversized message: the gateway kept the connection open")
		}
		if st := websocket.CloseStatus(err); st != websocket.StatusMessageTooBig {
			t.Fatalf("oversized message: closed with %v (%v), want StatusMessageTooBig", st, err)
		}
		break
	}
	check("after-oversized")

	// 2. A malformed frame: reserved bits set, unmasked (clients must mask).
	conn, br := rawWebSocket(t, g.url, "/v1/hosts/alpha/ssh", g.admin)
	if _, err := conn.Write([]byte{0xF2, 0x05, 'h', 'e', 'l', 'l', 'o'}); err != nil {
		t.Fatal(err)
	}
	readsUntilClosed(t, "malformed frame", conn, br)
	check("after-malformed")

	// 3. An agent tunnel that speaks garbage instead of yamux: that tunnel
	// ends (the host reads offline), the others serve on. Its key is one
	// a real agent enrolled with (and so proved it holds), so the garbage
	// tunnel is routable at once, as a reconnect is.
	gammaState := t.TempDir()
	g.startAgent("gamma", gammaState).stop()
	g.waitConnected("gamma", false, 30*time.Second)
	key, err := sshlayer.LoadOrCreateHostKey(filepath.Join(gammaState, "host_key"))
	if err != nil {
		t.Fatal(err)
	}
	ahdr := http.Header{}
	ahdr.Set("Authorization", "Bearer "+g.token("agent", "gamma"))
	ahdr.Set(wire.HeaderHostKey, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key.PublicKey()))))
	ahdr.Set(wire.HeaderInfo, wire.EncodeInfo(hostgate.Info{Kind: "machine"}))
	aws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.url, "http")+wire.ConnectPath, &websocket.DialOptions{HTTPHeader: ahdr})
	if err != nil {
		t.Fatal(err)
	}
	defer aws.CloseNow()
	g.waitConnected("gamma", true, 30*time.Second)
	actx, cancel2 := context.WithTimeout(ctx, 30*time.Second)
	defer cancel2()
	if err := aws.Write(actx, websocket.MessageBinary, []byte("this is not yamux, it is garbage\x00\xff\xfe")); err != nil {
		t.Fatal(err)
	}
	for {
		if _, _, err := aws.Read(actx); err != nil {
			if actx.Err() != nil {
				t.Fatal("garbage on an agent tunnel: the gateway kept it open")
			}
			break
		}
	}
	g.waitConnected("gamma", false, 30*time.Second)
	check("after-garbage-tunnel")
}
