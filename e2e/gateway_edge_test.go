package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/agent"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/sshlayer"
)

// TestFirstEnrollmentRace: several agents with different keys enroll the
// same new host id at once. Trust on first use must pick exactly one: it
// keeps its tunnel and its key is the pin; every other one is refused.
func TestFirstEnrollmentRace(t *testing.T) {
	const n = 8
	g := startGateway(t, "")
	ctx := testCtx(t, 2*time.Minute)
	st, err := store.Open(ctx, filepath.Join(g.stateDir, "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := make([]string, n)
	dirs := make([]string, n)
	keys := make([]string, n)
	for i := range n {
		if tokens[i], _, err = st.CreateToken(ctx, store.TokenSpec{Role: store.RoleAgent, Hosts: []string{"contested"}}); err != nil {
			t.Fatal(err)
		}
		dirs[i] = t.TempDir()
		k, err := sshlayer.LoadOrCreateHostKey(filepath.Join(dirs[i], agent.HostKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = ssh.FingerprintSHA256(k.PublicKey())
	}
	st.Close()

	actx, stop := context.WithCancel(ctx)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		wins  = map[int]int{}
		logs  = make([]*testenv.LogBuffer, n)
		start = make(chan struct{})
	)
	defer func() { stop(); wg.Wait() }()
	for i := range n {
		logs[i] = &testenv.LogBuffer{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_ = agent.Connect(actx, &agent.ConnectConfig{
				GatewayURL: g.url, Token: tokens[i], HostID: "contested", StateDir: dirs[i],
				// Debug: a refusal the same as the last is logged at
				// that level only, and the test counts every one.
				Logger:     slog.New(slog.NewTextHandler(logs[i], &slog.HandlerOptions{Level: slog.LevelDebug})),
				MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
				OnTunnel: func(string) {
					mu.Lock()
					wins[i]++
					mu.Unlock()
				},
			})
		}()
	}
	close(start)

	// Wait until every loser has been refused at least twice (so it has
	// retried after the winner's tunnel was certainly up).
	deadline := time.Now().Add(60 * time.Second)
	for {
		refused := 0
		for i := range n {
			if strings.Count(logs[i].String(), "host_key_mismatch") >= 2 {
				refused++
			}
		}
		if refused == n-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s only %d of %d competing agents were refused; wins %v", refused, n-1, wins)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	winners := len(wins)
	var winner int
	for i := range wins {
		winner = i
	}
	mu.Unlock()
	if winners != 1 {
		t.Fatalf("%d agents with different keys got a tunnel for one new host: %v", winners, wins)
	}
	rec, err := g.hostRecord("contested")
	if err != nil {
		t.Fatal(err)
	}
	if rec.HostKey != keys[winner] || !rec.Connected {
		t.Fatalf("pinned %s (connected %v), but the agent that got the tunnel has %s", rec.HostKey, rec.Connected, keys[winner])
	}
	if strings.Contains(logs[winner].String(), "host_key_mismatch") {
		t.Fatalf("the winner was refused at some point:\n%s", logs[winner].String())
	}
	execEcho(t, ctx, g.url, g.admin, "contested", "one-winner")
}

// TestBadInputNever500: malformed requests get a fitting 4xx with a JSON
// error, never a 5xx or a success.
func TestBadInputNever500(t *testing.T) {
	g := startGateway(t, "")
	g.startAgent("alpha", "")
	agentTok := g.token("agent", "alpha")
	ctx := testCtx(t, time.Minute)

	rsaKey, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	rsaPub, _ := ssh.NewPublicKey(&rsaKey.PublicKey)
	sess, err := sshlayer.GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	c := func(pub string) string { b, _ := json.Marshal(map[string]string{"publicKey": pub}); return string(b) }
	good, err := sshlayer.GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	ws := map[string]string{"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13"}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range ws {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	certPath := "/v1/hosts/alpha/certificates"
	for _, tc := range []struct {
		name, method, path, token, body string
		hdr                             map[string]string
	}{
		{"not JSON", "POST", certPath, g.admin, "{not json", nil},
		{"empty object", "POST", certPath, g.admin, "{}", nil},
		{"trailing data", "POST", certPath, g.admin, c(sess.PublicKey) + "{}", nil},
		{"garbage key", "POST", certPath, g.admin, c("ssh-ed25519 AAAAnotbase64!!"), nil},
		{"two keys", "POST", certPath, g.admin, c(sess.PublicKey + "\n" + good.PublicKey), nil},
		{"weak RSA key", "POST", certPath, g.admin, c(strings.TrimSpace(string(ssh.MarshalAuthorizedKey(rsaPub)))), nil},
		{"huge body", "POST", certPath, g.admin, `{"publicKey":"` + strings.Repeat("A", 4<<20) + `"}`, nil},
		{"wrong field type", "POST", certPath, g.admin, `{"publicKey": 42}`, nil},
		{"unknown host", "POST", "/v1/hosts/nosuch/certificates", g.admin, c(sess.PublicKey), nil},
		{"invalid host id", "GET", "/v1/hosts/..%2F..%2Fetc", g.admin, "", nil},
		{"NUL in host id", "GET", "/v1/hosts/a%00b", g.admin, "", nil},
		{"long host id", "GET", "/v1/hosts/" + strings.Repeat("x", 5000), g.admin, "", nil},
		{"ssh without upgrade", "GET", "/v1/hosts/alpha/ssh", g.admin, "", nil},
		{"connect without upgrade", "GET", wire.ConnectPath, agentTok, "", nil},
		{"connect without host key", "GET", wire.ConnectPath, agentTok, "", with(nil)},
		{"connect with a garbage host key", "GET", wire.ConnectPath, agentTok, "", with(map[string]string{wire.HeaderHostKey: "ssh-ed25519 garbage"})},
		{"connect with bad info", "GET", wire.ConnectPath, agentTok, "", with(map[string]string{wire.HeaderHostKey: sess.PublicKey, wire.HeaderInfo: "!!!"})},
		{"connect with huge info", "GET", wire.ConnectPath, agentTok, "", with(map[string]string{wire.HeaderHostKey: sess.PublicKey, wire.HeaderInfo: strings.Repeat("A", 60000)})},
		{"connect for another host id", "GET", wire.ConnectPath, agentTok, "", with(map[string]string{wire.HeaderHostKey: sess.PublicKey, wire.HeaderHostID: "beta"})},
		{"connect with an admin token", "GET", wire.ConnectPath, g.admin, "", with(map[string]string{wire.HeaderHostKey: sess.PublicKey})},
		{"unknown API path", "GET", "/v1/nope", g.admin, "", nil},
		{"wrong method", "DELETE", "/v1/hosts/alpha", g.admin, "", nil},
	} {
		req, err := http.NewRequestWithContext(ctx, tc.method, g.url+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tc.token)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range tc.hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(res.Body)
		res.Body.Close()
		if res.StatusCode < 400 || res.StatusCode >= 500 {
			t.Errorf("%s: %d %.200s, want a 4xx", tc.name, res.StatusCode, body.String())
			continue
		}
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge && (json.Unmarshal(body.Bytes(), &e) != nil || e.Error.Code == "") {
			t.Errorf("%s: %d without a JSON error: %.200q", tc.name, res.StatusCode, body.String())
		}
	}
	// Still healthy and the host still connected.
	if rec, err := g.hostRecord("alpha"); err != nil || !rec.Connected {
		t.Fatalf("after bad input: %+v %v", rec, err)
	}
}

// TestExpiredToken: an expired token is refused like a bad one (401 JSON,
// saying why), for the API and for an agent's tunnel.
func TestExpiredToken(t *testing.T) {
	g := startGateway(t, "")
	ctx := testCtx(t, time.Minute)
	st, err := store.Open(ctx, filepath.Join(g.stateDir, "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Minute)
	clientTok, _, err := st.CreateToken(ctx, store.TokenSpec{Role: store.RoleAdmin, ExpiresAt: past})
	if err != nil {
		t.Fatal(err)
	}
	agentTok, _, err := st.CreateToken(ctx, store.TokenSpec{Role: store.RoleAgent, Hosts: []string{"late"}, ExpiresAt: past})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()

	code, body := g.api("GET", "/v1/hosts", clientTok, nil)
	if code != http.StatusUnauthorized || !strings.Contains(string(body), "expired") {
		t.Fatalf("expired admin token: %d %s, want 401 saying expired", code, body)
	}
	apiError(t, body)

	logs := &testenv.LogBuffer{}
	actx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	done := make(chan error, 1)
	go func() {
		done <- agent.Connect(actx, &agent.ConnectConfig{GatewayURL: g.url, Token: agentTok, HostID: "late", StateDir: t.TempDir(),
			Logger: slog.New(slog.NewTextHandler(logs, nil)), MinBackoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "expired") {
		if time.Now().After(deadline) {
			t.Fatalf("agent with an expired token: no clear reason in its log:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if code, body := g.api("GET", "/v1/hosts/late", g.admin, nil); code != http.StatusNotFound {
		t.Fatalf("a host whose agent token had expired was enrolled: %d %s", code, body)
	}
}
