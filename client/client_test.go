package client

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/sshlayer"
)

// A call that waits on work (exec) is bounded by the caller's ctx alone;
// one that answers at once by the API call timeout. A 30 s timeout on
// every call cut longer commands, and the gateway destroyed their
// execution.
func TestLongCallsNotCutByTheAPITimeout(t *testing.T) {
	defer func(d time.Duration) { apiCallTimeout = d }(apiCallTimeout)
	apiCallTimeout = 50 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(300 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/exec") {
			_, _ = w.Write([]byte(`{"exitCode":0,"stdout":"done","stderr":"","durationMs":300}`))
			return
		}
		_, _ = w.Write([]byte(`[]`))
	}))
	defer srv.Close()
	c, err := New(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := c.Exec(ctx, "e1", ExecRequest{Command: "sleep", TimeoutMs: 60000})
	if err != nil || res.Stdout != "done" {
		t.Fatalf("an exec longer than the API call timeout: %+v, %v", res, err)
	}
	if _, err := c.Hosts(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a listing slower than the API call timeout: %v, want its deadline", err)
	}
	// Nor by the caller's HTTPClient.Timeout, which bounds the calls that
	// answer at once (found by the audit31 audit).
	apiCallTimeout = time.Minute
	c, err = New(srv.URL, "tok", &Options{HTTPClient: &http.Client{Timeout: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	res, err = c.Exec(ctx, "e1", ExecRequest{Command: "sleep", TimeoutMs: 60000})
	if err != nil || res.Stdout != "done" {
		t.Fatalf("an exec longer than the HTTPClient's Timeout: %+v, %v", res, err)
	}
	if _, err := c.Hosts(ctx); err == nil || !strings.Contains(err.Error(), "Client.Timeout") {
		t.Fatalf("a listing slower than the HTTPClient's Timeout: %v, want its timeout", err)
	}
}

// The caller's HTTP client (a gateway behind a private CA) dials the
// WebSocket handshakes too, not only the API calls.
func TestHTTPClientDialsWebSockets(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := bytestream.Accept(w, r, nil)
		if err != nil {
			return
		}
		_ = conn.Close()
	}))
	defer srv.Close()
	hc := srv.Client()
	hc.Timeout = time.Minute
	c, err := New(srv.URL, "tok", &Options{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := c.DialSSH(context.Background(), "h1")
	if err != nil {
		t.Fatalf("DialSSH through a private CA with the caller's client: %v", err)
	}
	_ = conn.Close()
}

// Options.RootCAs trusts a gateway's private CA for the API calls and the
// WebSocket streams, which stay on bytestream's own transport.
func TestRootCAs(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/hosts" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"hosts":[{"id":"h1"}]}`))
			return
		}
		conn, err := bytestream.Accept(w, r, nil)
		if err != nil {
			return
		}
		_ = conn.Close()
	}))
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	c, err := New(srv.URL, "tok", &Options{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	if hosts, err := c.Hosts(context.Background()); err != nil || len(hosts) != 1 {
		t.Fatalf("an API call with RootCAs: %v %v", hosts, err)
	}
	conn, err := c.DialSSH(context.Background(), "h1")
	if err != nil {
		t.Fatalf("DialSSH with RootCAs: %v", err)
	}
	_ = conn.Close()
}

// Only the gateway's host_offline is ErrOffline; another 503 (a full
// tunnel, a gateway stopping) says what it is.
func TestOnlyHostOfflineIsErrOffline(t *testing.T) {
	for code, offline := range map[string]bool{"host_offline": true, "too_many_streams": false, "shutting_down": false} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"` + code + `","message":"no"}}`))
		}))
		c, err := New(srv.URL, "tok", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.sshConnect(context.Background(), "h1", sshlayer.Auth{}, nil)
		srv.Close()
		if got := errors.Is(err, ErrOffline); got != offline {
			t.Errorf("503 %s: %v; ErrOffline %v, want %v", code, err, got, offline)
		}
	}
}

// A refused SSH stream says the gateway's error as the API's do, not its
// raw JSON body, and callers still find both the *APIError and the
// *bytestream.HandshakeError in it; a host_offline refusal is ErrOffline.
func TestRefusedSSHStreamSaysTheGatewaysError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"host_offline","message":"host box: not connected to the gateway"}}`))
	}))
	defer srv.Close()
	c, err := New(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	_, err = c.DialSSH(ctx, "box")
	want := "client: ssh stream to host box: gateway: not connected to the gateway (503 host_offline)"
	if err == nil || err.Error() != want {
		t.Fatalf("DialSSH: %v\nwant %s", err, want)
	}
	var ae *APIError
	var he *bytestream.HandshakeError
	if !errors.As(err, &ae) || ae.Code != "host_offline" || !errors.As(err, &he) || he.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("DialSSH: %v; want an *APIError host_offline and a 503 *bytestream.HandshakeError in it", err)
	}
	_, err = c.sshConnect(ctx, "box", sshlayer.Auth{}, nil)
	if !errors.Is(err, ErrOffline) || strings.Contains(err.Error(), `{"error"`) {
		t.Fatalf("connect: %v; want ErrOffline, without the raw body", err)
	}
}

// The gateway's messages name the host ("host box: not connected to the
// gateway"), for a curl user; an error the client tells under the host's
// name (Dial's, a Host's, DialSSH's) leaves that out rather than naming
// the host twice, while Message keeps it and a call that does not name
// the host (Client.Host) says it as the gateway does. Before, a caller saw
// "host box: hostgate: connect: … gateway: host box is not connected to
// the gateway" (found by the leftovers29 audit); then, its prefixes
// stacked, "host box: hostgate: connect: client: host is offline:
// gateway: not connected to the gateway (503 host_offline)", which reads
// "host box: offline: not connected to the gateway (503 host_offline)"
// (found by the leftovers30 audit).
func TestGatewayErrorsNameTheHostOnce(t *testing.T) {
	mux := http.NewServeMux()
	refuse := func(status int, code, msg string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = fmt.Fprintf(w, `{"error":{"code":%q,"message":%q}}`, code, msg)
		}
	}
	mux.HandleFunc("GET /v1/hosts/nope", refuse(404, "not_found", "host nope: not among the hosts this token reaches"))
	mux.HandleFunc("GET /v1/hosts/box", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"id":"box","kind":"machine","hostKey":"SHA256:x","connected":false}`)
	})
	mux.HandleFunc("POST /v1/hosts/box/certificates", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"certificate":"x","validBefore":"2999-01-01T00:00:00Z","hostKey":"SHA256:x"}`)
	})
	mux.HandleFunc("GET /v1/hosts/box/ssh", refuse(503, "host_offline", "host box: not connected to the gateway"))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := New(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	check := func(what string, err error, host, want string) {
		t.Helper()
		if err == nil || err.Error() != "host "+host+": "+want {
			t.Errorf("%s: %v\nwant %q", what, err, "host "+host+": "+want)
		}
		var ae *APIError
		if !errors.As(err, &ae) || !strings.HasPrefix(ae.Message, "host "+host+": ") {
			t.Errorf("%s: %v; want an *APIError whose Message is the gateway's, naming host %s", what, err, host)
		}
	}
	_, err = c.Dial(ctx, "nope")
	check("Dial of a host the token does not reach", err, "nope", "gateway: not among the hosts this token reaches (404 not_found)")
	_, err = c.LazyHost("nope").Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
	check("a lazy Host the token does not reach", err, "nope", "gateway: not among the hosts this token reaches (404 not_found)")
	_, err = c.Dial(ctx, "box")
	check("Dial of an offline host", err, "box", "offline: not connected to the gateway (503 host_offline)")
	if !errors.Is(err, ErrOffline) {
		t.Errorf("Dial of an offline host: %v, want ErrOffline", err)
	}
	_, err = c.LazyHost("box").Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
	check("a lazy Host offline", err, "box", "offline: not connected to the gateway (503 host_offline)")
	if !errors.Is(err, ErrOffline) {
		t.Errorf("a lazy Host offline: %v, want ErrOffline", err)
	}

	// Unnamed by the client, the gateway's message is whole.
	if _, err := c.Host(ctx, "nope"); err == nil || err.Error() != "gateway: host nope: not among the hosts this token reaches (404 not_found)" {
		t.Errorf("Host: %v, want the gateway's message whole", err)
	}
}

// nginxBadGateway is what nginx answers for a gateway it cannot reach.
const nginxBadGateway = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n</body>\r\n</html>\r\n"

// A proxy in front of a gateway that is down answers for it: the error
// says that the gateway did not answer and what to do, not the proxy's
// HTML page (which the API calls gave whole) or a bare "websocket
// handshake: status 502" (an empty body on the SSH stream) (found by the
// audit30 audit).
func TestProxyAnswerForADownGatewaySaysSo(t *testing.T) {
	for name, body := range map[string]string{"nginx page": nginxBadGateway, "empty": ""} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(http.StatusBadGateway)
				_, _ = io.WriteString(w, body)
			}))
			defer srv.Close()
			c, err := New(srv.URL, "tok", nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.DialSSH(t.Context(), "box")
			var he *bytestream.HandshakeError
			if !errors.As(err, &he) || he.StatusCode != http.StatusBadGateway {
				t.Errorf("DialSSH: %v; want the 502 *bytestream.HandshakeError in it", err)
			}
			_, herr := c.Hosts(t.Context())
			for _, err := range []error{err, herr} {
				if err == nil || !strings.Contains(err.Error(), "the gateway did not answer") || !strings.Contains(err.Error(), "start the gateway") || strings.Contains(err.Error(), "<") {
					t.Errorf("error %q: want it to say the gateway did not answer and what to do, without the page", err)
				}
			}
		})
	}
}

// A gateway whose certificate no trusted CA signed (a private CA, the
// README's TLS proxy) fails the client's calls and streams with the fix
// named, as gateway proxy, gateway cert and the agent say it. Before, a
// Go program got x509's "certificate signed by unknown authority" alone.
func TestUntrustedGatewayCertificateNamesTheFix(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the client's refused handshakes
	c, err := New(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Hosts(context.Background())
	if err == nil || !strings.Contains(err.Error(), "unknown authority") || !strings.Contains(err.Error(), "private CA") {
		t.Errorf("an API call to a gateway behind an untrusted certificate: %v; want the x509 error and the fix", err)
	}
	_, err = c.DialSSH(context.Background(), "h1")
	if err == nil || !strings.Contains(err.Error(), "unknown authority") || !strings.Contains(err.Error(), "private CA") {
		t.Errorf("a stream to a gateway behind an untrusted certificate: %v; want the x509 error and the fix", err)
	}
}

// A Host retrying while its host is offline reuses its certificate: each
// retry of a reconnecting program asked the gateway for a new one (an
// audit entry each; 10 in a second were seen by the operator34 audit).
// An SSH handshake that fails on a kept certificate (the host's pinned
// key reset meanwhile) tries a new one at once, and then forgets it.
func TestReconnectsKeepTheirCertificate(t *testing.T) {
	var certs, dials atomic.Int32
	var accept atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/hosts/box", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"id":"box","kind":"machine","hostKey":"SHA256:x","connected":false}`)
	})
	mux.HandleFunc("POST /v1/hosts/box/certificates", func(w http.ResponseWriter, r *http.Request) {
		certs.Add(1)
		_, _ = io.WriteString(w, `{"certificate":"x","validBefore":"2999-01-01T00:00:00Z","hostKey":"SHA256:x"}`)
	})
	mux.HandleFunc("GET /v1/hosts/box/ssh", func(w http.ResponseWriter, r *http.Request) {
		dials.Add(1)
		if !accept.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"host_offline","message":"host box: not connected to the gateway"}}`)
			return
		}
		// The stream opens, and ends before any SSH: the handshake fails.
		if c, err := websocket.Accept(w, r, nil); err == nil {
			_ = c.CloseNow()
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := New(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	h := c.LazyHost("box")
	defer h.Close()
	for range 5 {
		if _, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); !errors.Is(err, ErrOffline) {
			t.Fatalf("exec on an offline host: %v, want ErrOffline", err)
		}
	}
	if n, d := certs.Load(), dials.Load(); n != 1 || d != 5 {
		t.Fatalf("5 connects to an offline host asked for %d certificates in %d dials, want 1 in 5", n, d)
	}

	accept.Store(true)
	if _, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err == nil || errors.Is(err, ErrOffline) {
		t.Fatalf("exec through a failing handshake: %v, want the handshake's error", err)
	}
	if n, d := certs.Load(), dials.Load(); n != 2 || d != 7 {
		t.Fatalf("a handshake failing on the kept certificate: %d certificates, %d dials; want 2 (a new one at once) and 7", n, d)
	}
	if _, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err == nil {
		t.Fatal("exec through a failing handshake succeeded")
	}
	if n, d := certs.Load(), dials.Load(); n != 3 || d != 8 {
		t.Fatalf("after a failed handshake: %d certificates, %d dials; want 3 (the failed one forgotten) and 8", n, d)
	}
}

// Dial asks for the host's record together with its certificate, not one
// after the other: a round trip less for a program far from its gateway
// (BenchmarkDialLatency). The record's answer here waits for the
// certificate's request, which a Dial asking in turn sends only after it.
func TestDialAsksForTheRecordWithTheCertificate(t *testing.T) {
	certAsked := make(chan struct{})
	var once sync.Once
	srv := offlineStandIn(t, func() error {
		select {
		case <-certAsked:
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("no certificate was asked for while the record was")
		}
	}, func() { once.Do(func() { close(certAsked) }) })
	if _, err := Dial(t.Context(), srv.URL, "tok", "box"); !errors.Is(err, ErrOffline) {
		t.Fatalf("Dial of an offline host: %v, want ErrOffline", err)
	}
}
