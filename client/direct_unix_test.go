//go:build unix

package client

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/sshlayer"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// directGateway is a gateway of the client's API for host "box": its
// certificates are signed by its own CA and name direct, and its relay
// bridges to the same SSH server the direct addresses may reach.
type directGateway struct {
	url    string
	server *sshlayer.TestServer
	// handler is the gateway's, for a test that serves it another way.
	handler http.Handler
	relays  atomic.Int32
	// failed is each relay request's wire.HeaderDirectFailed, in order.
	failedMu sync.Mutex
	failed   []string
}

func newDirectGateway(t testing.TB, direct func() []string) *directGateway {
	t.Helper()
	_, caKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := ssh.NewSignerFromKey(caKey)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := sshlayer.StartTestServerConfig(&sshlayer.ServerConfig{TrustedUserCAs: []ssh.PublicKey{ca.PublicKey()}, Principal: "box"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Close() })
	g := &directGateway{server: ts}
	hostPub := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(ts.HostPublicKey)))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/hosts/box", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(HostRecord{ID: "box", Kind: "machine", HostKey: ts.HostKey, HostPublicKey: hostPub, Connected: true})
	})
	mux.HandleFunc("POST /v1/hosts/box/certificates", func(w http.ResponseWriter, r *http.Request) {
		var req struct{ PublicKey string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(req.PublicKey))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		now := time.Now()
		cert := &ssh.Certificate{Key: pub, CertType: ssh.UserCert, KeyId: "client-test", ValidPrincipals: []string{"box"},
			ValidAfter: uint64(now.Add(-time.Minute).Unix()), ValidBefore: uint64(now.Add(10 * time.Minute).Unix()),
			Permissions: ssh.Permissions{Extensions: map[string]string{"permit-pty": ""}}}
		if err := cert.SignCert(rand.Reader, ca); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(Certificate{Certificate: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(cert))),
			ValidBefore: now.Add(10 * time.Minute), HostKey: ts.HostKey, HostPublicKey: hostPub, Direct: direct()})
	})
	mux.HandleFunc("GET /v1/hosts/box/ssh", func(w http.ResponseWriter, r *http.Request) {
		g.relays.Add(1)
		g.failedMu.Lock()
		g.failed = append(g.failed, r.Header.Get(wire.HeaderDirectFailed))
		g.failedMu.Unlock()
		tcp, err := net.Dial("tcp", ts.Addr)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		ws, err := bytestream.Accept(w, r, nil)
		if err != nil {
			_ = tcp.Close()
			return
		}
		done := make(chan struct{})
		go func() { _, _ = io.Copy(tcp, ws); _ = tcp.Close(); close(done) }()
		_, _ = io.Copy(ws, tcp)
		_ = ws.Close()
		<-done
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	g.url, g.handler = srv.URL, mux
	return g
}

func execEcho(t *testing.T, h *hostgate.Host) {
	t.Helper()
	res, err := h.Exec(t.Context(), []string{"echo", "hi"}, hostgate.ExecOptions{})
	if err != nil || string(res.Stdout) != "hi\n" {
		t.Fatalf("exec: %q, %v", res.Stdout, err)
	}
}

// A host whose certificate names a direct address that answers is reached
// there: the command runs and the gateway relays nothing, the
// synchronous filesystem's own connection included.
func TestDirectSessionSkipsTheRelay(t *testing.T) {
	var g *directGateway
	g = newDirectGateway(t, func() []string { return []string{"127.0.0.1:1", g.server.Addr} })
	c, err := New(g.url, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Dial(t.Context(), "box")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	execEcho(t, h)
	spec, err := h.Sync(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := spec.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.FS.Stat(t.Context(), "/"); err != nil {
		t.Fatalf("stat over the direct sync connection: %v", err)
	}
	_ = sc.Close()
	if n := g.relays.Load(); n != 0 {
		t.Fatalf("the gateway relayed %d connections, want 0: the direct address answered", n)
	}
	if addr, err := c.DirectPath("box"); err != nil || addr != g.server.Addr {
		t.Fatalf("DirectPath after a direct connect: %q, %v; want %s", addr, err, g.server.Addr)
	}
}

// A direct address that does not answer, or an agent that refuses the
// session, leaves the relay: the command runs all the same, the client
// says why the direct path failed, and does not try it again for a while.
func TestDirectFallsBackToTheRelay(t *testing.T) {
	// An address that accepts and hangs up at once: a handshake that fails.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepts atomic.Int32
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			_ = conn.Close()
		}
	})
	defer wg.Wait()
	defer ln.Close()
	g := newDirectGateway(t, func() []string { return []string{ln.Addr().String()} })
	c, err := New(g.url, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		h, err := c.Dial(t.Context(), "box")
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		execEcho(t, h)
		_ = h.Close()
	}
	if n := g.relays.Load(); n != 2 {
		t.Fatalf("%d relays, want 2: each connect fell back", n)
	}
	if n := accepts.Load(); n != 1 {
		t.Fatalf("the direct address was tried %d times in two connects, want once: a failed path waits directRetry", n)
	}
	// The relay after the failure tells the gateway why; the next one,
	// which did not try, says nothing.
	g.failedMu.Lock()
	failed := slices.Clone(g.failed)
	g.failedMu.Unlock()
	if len(failed) != 2 || !strings.Contains(failed[0], "direct ssh to "+ln.Addr().String()) || failed[1] != "" {
		t.Fatalf("the relays' %s headers: %q; want the failure on the first alone", wire.HeaderDirectFailed, failed)
	}
	if _, err := c.DirectPath("box"); err == nil || !strings.Contains(err.Error(), "direct ssh to "+ln.Addr().String()) {
		t.Fatalf("DirectPath: %v, want the failed handshake at the address", err)
	}
}

// RelayOnly never dials a direct address.
func TestRelayOnlySkipsDirect(t *testing.T) {
	var g *directGateway
	g = newDirectGateway(t, func() []string { return []string{g.server.Addr} })
	c, err := New(g.url, "tok", &Options{RelayOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Dial(t.Context(), "box")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	execEcho(t, h)
	if n := g.relays.Load(); n != 1 {
		t.Fatalf("%d relays with RelayOnly, want 1", n)
	}
	if addr, err := c.DirectPath("box"); addr != "" || err != nil {
		t.Fatalf("DirectPath with RelayOnly: %q, %v; want none tried", addr, err)
	}
}

// connSeqKey is the test gateway's number of the connection a request
// came on, in the order the gateway accepted them.
type connSeqKey struct{}

// A connect dials its SSH stream's connection while it waits for its
// certificate, and sends the stream's request on it: the gateway's
// certificate answer here waits for a connection that has carried no
// request, and the stream must come on one accepted by then, where a
// connect dialing after the answer comes on a later one.
//
// The host's record is asked for beside the certificate, on a connection
// of its own: its request is held until the certificate is answered, and
// the certificate waits for it to arrive, so that connection is never
// the one taken for the predial's (a flake under -race, where the
// record's connection was accepted before its request was read).
func TestConnectPredialsTheStream(t *testing.T) {
	g := newDirectGateway(t, func() []string { return nil })
	var (
		mu        sync.Mutex
		accepted  int
		used      = map[int]bool{}
		record    bool                  // the record's request has arrived
		answered  = make(chan struct{}) // the certificate is answered
		watermark int                   // connections accepted when the certificate was answered
		stream    int                   // the connection the SSH stream came on
	)
	answer := sync.OnceFunc(func() { close(answered) }) // a second certificate would close it again
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seq := r.Context().Value(connSeqKey{}).(int)
		mu.Lock()
		used[seq] = true
		mu.Unlock()
		switch {
		case r.URL.Path == "/v1/hosts/box":
			mu.Lock()
			record = true
			mu.Unlock()
			select {
			case <-answered:
			case <-time.After(10 * time.Second):
			}
		case strings.HasSuffix(r.URL.Path, "/certificates"):
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				mu.Lock()
				idle := record && accepted > len(used)
				mu.Unlock()
				if idle {
					break
				}
			}
			mu.Lock()
			watermark = accepted
			mu.Unlock()
			answer()
		case strings.HasSuffix(r.URL.Path, "/ssh"):
			mu.Lock()
			stream = seq
			mu.Unlock()
		}
		g.handler.ServeHTTP(w, r)
	}))
	srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		mu.Lock()
		defer mu.Unlock()
		accepted++
		return context.WithValue(ctx, connSeqKey{}, accepted)
	}
	srv.Start()
	defer srv.Close()
	c, err := New(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	h, err := c.Dial(t.Context(), "box")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	execEcho(t, h)
	mu.Lock()
	defer mu.Unlock()
	if stream == 0 || stream > watermark {
		t.Fatalf("the SSH stream came on connection %d, of %d accepted when the certificate was answered: it was not dialed while the connect waited", stream, watermark)
	}
}

// A connect that goes direct ends a predial still under way rather than
// waiting for it: a gateway slow to take the stream's connection (a TLS
// handshake that stalls) does not hold up a host reached without it.
func TestDirectEndsASlowPredial(t *testing.T) {
	var g *directGateway
	g = newDirectGateway(t, func() []string { return []string{g.server.Addr} })
	started, ended := make(chan struct{}), make(chan struct{})
	orig := predialWebSocket
	predialWebSocket = func(ctx context.Context, _ string, _ *bytestream.WebSocketOptions) (*bytestream.Predialed, error) {
		close(started)
		<-ctx.Done()
		close(ended)
		return nil, ctx.Err()
	}
	t.Cleanup(func() { predialWebSocket = orig })
	c, err := New(g.url, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	h, err := c.Dial(ctx, "box")
	if err != nil {
		t.Fatalf("Dial with a predial that never ends: %v", err)
	}
	defer h.Close()
	select {
	case <-started:
	default:
		t.Fatal("no predial: the test tests nothing")
	}
	select {
	case <-ended:
	default:
		t.Fatal("Dial returned with its predial still under way")
	}
	execEcho(t, h)
	if n := g.relays.Load(); n != 0 {
		t.Fatalf("the gateway relayed %d connections, want 0", n)
	}
}
