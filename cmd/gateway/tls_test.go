package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// testCert is a self-signed certificate written as PEM files.
type testCert struct {
	certPEM, keyPEM []byte
	leaf            *x509.Certificate
}

func newTestCert(t *testing.T, notAfter time.Time, names ...string) testCert {
	t.Helper()
	c, k, leaf := testenv.SelfSigned(t, notAfter, names...)
	return testCert{certPEM: c, keyPEM: k, leaf: leaf}
}

func (c testCert) write(t *testing.T, certFile, keyFile string) {
	t.Helper()
	if certFile != "" {
		writeNewer(t, certFile, c.certPEM)
	}
	if keyFile != "" {
		writeNewer(t, keyFile, c.keyPEM)
	}
}

// writeNewer writes b to path with a modification time later than the
// file's before: a rewrite within the file system's timestamp granularity
// of a same-sized file must still read as a change.
func writeNewer(t *testing.T, path string, b []byte) {
	t.Helper()
	var was time.Time
	if fi, err := os.Stat(path); err == nil {
		was = fi.ModTime()
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err == nil && !fi.ModTime().After(was) {
		later := was.Add(time.Second)
		if err := os.Chtimes(path, later, later); err != nil {
			t.Fatal(err)
		}
	}
}

func (c testCert) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.leaf)
	return p
}

// A bad pair refuses to start, naming both files and what they must hold;
// crypto/tls alone says only which check failed.
func TestTLSFilesLoadErrors(t *testing.T) {
	dir := t.TempDir()
	a := newTestCert(t, time.Now().Add(90*24*time.Hour), "gw.example.com")
	b := newTestCert(t, time.Now().Add(90*24*time.Hour), "gw.example.com")
	certFile, keyFile := filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "privkey.pem")
	logger := slog.New(slog.DiscardHandler)

	if _, err := loadTLSFiles(certFile, keyFile, logger); err == nil || !strings.Contains(err.Error(), "--tls-cert "+certFile) {
		t.Errorf("no files: %v, want the --tls-cert file named", err)
	}
	a.write(t, certFile, "")
	b.write(t, "", keyFile)
	_, err := loadTLSFiles(certFile, keyFile, logger)
	if err == nil || !strings.Contains(err.Error(), certFile) || !strings.Contains(err.Error(), keyFile) || !strings.Contains(err.Error(), "private key does not match") || !strings.Contains(err.Error(), "fullchain.pem and privkey.pem") {
		t.Errorf("a key of another certificate: %v", err)
	}
	writeNewer(t, certFile, []byte("not PEM\n"))
	if _, err := loadTLSFiles(certFile, keyFile, logger); err == nil || !strings.Contains(err.Error(), "want the PEM certificate chain") {
		t.Errorf("a certificate file without PEM: %v", err)
	}
	a.write(t, certFile, keyFile)
	if _, err := loadTLSFiles(certFile, keyFile, logger); err != nil {
		t.Errorf("the matching pair: %v", err)
	}
}

// A renewal is taken without a restart; a pair caught half-written, or a
// file gone, leaves the certificate loaded before in service.
func TestTLSFilesReload(t *testing.T) {
	was := tlsRecheck
	tlsRecheck = 0
	t.Cleanup(func() { tlsRecheck = was })
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "privkey.pem")
	a := newTestCert(t, time.Now().Add(90*24*time.Hour), "gw.example.com")
	a.write(t, certFile, keyFile)
	var logs testenv.LogBuffer
	tf, err := loadTLSFiles(certFile, keyFile, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	serving := func() *x509.Certificate {
		t.Helper()
		c, err := tf.certificate(nil)
		if err != nil || c == nil {
			t.Fatalf("certificate: %v %v", c, err)
		}
		return c.Leaf
	}
	if !serving().Equal(a.leaf) {
		t.Fatal("not serving the loaded certificate")
	}

	b := newTestCert(t, time.Now().Add(90*24*time.Hour), "gw.example.com")
	b.write(t, certFile, "")
	if !serving().Equal(a.leaf) {
		t.Error("a new certificate with the old key: served, want the pair loaded before")
	}
	if !strings.Contains(logs.String(), "the changed files do not load") {
		t.Errorf("the half-written pair was not logged:\n%s", logs.String())
	}
	b.write(t, "", keyFile)
	if !serving().Equal(b.leaf) {
		t.Error("the renewed pair was not taken")
	}
	if !strings.Contains(logs.String(), `msg="TLS certificate reloaded"`) {
		t.Errorf("no reload line:\n%s", logs.String())
	}
	if got := tf.expiry(); !got.Equal(b.leaf.NotAfter) {
		t.Errorf("expiry %v, want the renewed certificate's %v", got, b.leaf.NotAfter)
	}

	if err := os.Remove(certFile); err != nil {
		t.Fatal(err)
	}
	if !serving().Equal(b.leaf) {
		t.Error("with the certificate file gone: not serving the pair loaded before")
	}
	if !strings.Contains(logs.String(), "a file is gone") {
		t.Errorf("the missing file was not logged:\n%s", logs.String())
	}
	c := newTestCert(t, time.Now().Add(10*24*time.Hour), "gw.example.com")
	c.write(t, certFile, keyFile)
	if !serving().Equal(c.leaf) {
		t.Error("the pair written back was not taken")
	}
	if !regexp.MustCompile(`level=WARN msg="TLS certificate reloaded: the certificate expires in under 14 days`).MatchString(logs.String()) {
		t.Errorf("a certificate 10 days from its end was not warned of:\n%s", logs.String())
	}
}

func TestTLSPublicURL(t *testing.T) {
	for _, c := range []struct {
		names  []string
		listen string
		want   string // "" for an error
	}{
		{[]string{"gw.example.com", "*.preview.example.net"}, ":443", "https://gw.example.com"},
		{[]string{"gw.example.com"}, "0.0.0.0:8443", "https://gw.example.com:8443"},
		{[]string{"127.0.0.1"}, "127.0.0.1:8443", "https://127.0.0.1:8443"},
		{[]string{"::1"}, "[::1]:8443", "https://[::1]:8443"},
		{[]string{"*.preview.example.net", "gw.example.com"}, ":443", "https://gw.example.com"},
		{[]string{"*.example.com"}, ":443", ""},
		{nil, ":443", ""},
	} {
		got, err := tlsPublicURL(newTestCert(t, time.Now().Add(time.Hour), c.names...).leaf, c.listen)
		if got != c.want || (err != nil) != (c.want == "") {
			t.Errorf("names %v, --listen %s: %q, %v; want %q", c.names, c.listen, got, err, c.want)
		}
	}
}

func TestTLSFlagsValidated(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", "/etc/ssl/c.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-key", "/etc/ssl/k.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-cert", "c", "--tls-key", "k", "--public-url", "http://gw.example.com"}, "the gateway speaks only HTTPS"},
	} {
		_, err := parseServeFlags("serve", stdio{in: strings.NewReader(""), out: io.Discard, err: io.Discard}, c.args, serveConfig{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("serve %v: %v, want %q", c.args, err, c.want)
		}
	}
	// dev serves loopback HTTP for the printed commands: no TLS flags.
	if _, err := parseServeFlags("dev", stdio{in: strings.NewReader(""), out: io.Discard, err: io.Discard}, []string{"--tls-cert", "c"}, serveConfig{}); err == nil {
		t.Error("dev took --tls-cert")
	}
}

// `gateway serve --tls-cert --tls-key` is HTTPS itself, on HTTP/1.1 (the
// WebSockets are HTTP/1.1 upgrades): an API call and a login work over it,
// the login's cookie is the __Host- one an https gateway sets, the public
// URL defaults to the certificate's name on the port, a plain-HTTP
// request is told it reached HTTPS, and /metrics shows the certificate's
// end.
func TestServeTLS(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	cert := newTestCert(t, time.Now().Add(90*24*time.Hour), "127.0.0.1")
	certFile, keyFile := filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "privkey.pem")
	cert.write(t, certFile, keyFile)

	var logs testenv.LogBuffer
	c := &serveConfig{Listen: "127.0.0.1:0", StateDir: state, Docker: "off", CertTTL: time.Minute, LogFormat: "text", TLSCert: certFile, TLSKey: keyFile}
	a, stop := serveWith(t, c, &logs)
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	port := strconv.Itoa(a.(*net.TCPAddr).Port)
	base := "https://127.0.0.1:" + port
	if !strings.Contains(logs.String(), "publicURL="+base+" ") || !strings.Contains(logs.String(), "tls=true") {
		t.Errorf("serving line: want publicURL=%s and tls=true:\n%s", base, logs.String())
	}

	admin := tokenMaker(t, ctx, state)("--role", "admin")
	// http.Transport offers h2 first; the gateway must answer HTTP/1.1.
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.pool()}, ForceAttemptHTTP2: true}
	hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(hc.CloseIdleConnections)
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/me", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Proto != "HTTP/1.1" {
		t.Errorf("GET /v1/me over TLS: %d %s %s", res.StatusCode, res.Proto, body)
	}

	res, err = hc.PostForm(base+"/login", url.Values{"token": {admin}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var names []string
	for _, ck := range res.Cookies() {
		names = append(names, ck.Name)
		if ck.Name == "__Host-hostgate_session" && !ck.Secure {
			t.Error("the session cookie is not Secure")
		}
	}
	if !strings.Contains(strings.Join(names, " "), "__Host-hostgate_session") {
		t.Errorf("login over TLS set %v, want __Host-hostgate_session", names)
	}

	plain, err := http.Get("http://127.0.0.1:" + port + "/v1/me")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(plain.Body)
	plain.Body.Close()
	if plain.StatusCode != 400 || !strings.Contains(string(body), "HTTP request to an HTTPS server") {
		t.Errorf("plain HTTP to the TLS port: %d %q", plain.StatusCode, body)
	}

	req, _ = http.NewRequestWithContext(ctx, "GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	res, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	want := "hostgate_tls_certificate_expiry_timestamp_seconds " + strconv.FormatFloat(float64(cert.leaf.NotAfter.Unix()), 'e', -1, 64)
	if !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %q", want)
	}

	// A client that does not trust the certificate fails on its side; the
	// gateway's log keeps it at debug (scanners meet every TLS server).
	if _, err := http.Get(base + "/v1/me"); err == nil {
		t.Error("an untrusting client got through")
	}
	time.Sleep(100 * time.Millisecond)
	if strings.Contains(logs.String(), "TLS handshake error") {
		t.Errorf("a failed handshake was logged above debug:\n%s", logs.String())
	}
}
