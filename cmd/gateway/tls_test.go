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
		c := tf.current()
		if c == nil {
			t.Fatal("no certificate")
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
		got, err := tlsPublicURL(certNames(newTestCert(t, time.Now().Add(time.Hour), c.names...).leaf), c.listen)
		if got != c.want || (err != nil) != (c.want == "") {
			t.Errorf("names %v, --listen %s: %q, %v; want %q", c.names, c.listen, got, err, c.want)
		}
	}
	// With two certificates, the first exact name of either, in order:
	// the preview domain's wildcard may come first.
	dir := t.TempDir()
	preview := newTestCert(t, time.Now().Add(time.Hour), "*.example-preview.net")
	gw := newTestCert(t, time.Now().Add(time.Hour), "gw.example.com")
	preview.write(t, filepath.Join(dir, "p.pem"), filepath.Join(dir, "p.key"))
	gw.write(t, filepath.Join(dir, "g.pem"), filepath.Join(dir, "g.key"))
	ts, err := loadTLSCerts(filepath.Join(dir, "p.pem")+","+filepath.Join(dir, "g.pem"), filepath.Join(dir, "p.key")+","+filepath.Join(dir, "g.key"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ts.publicURL(":443"); got != "https://gw.example.com" {
		t.Errorf("a wildcard certificate, then gw.example.com's: %q, %v", got, err)
	}
}

// More than one pair: a caller gets the certificate that names the host
// it asked for (SNI), as crypto/tls chooses among Config.Certificates, and
// the first when none does or it named none; each is reloaded on its own.
func TestTLSCertsBySNI(t *testing.T) {
	was := tlsRecheck
	tlsRecheck = 0
	t.Cleanup(func() { tlsRecheck = was })
	dir := t.TempDir()
	gw := newTestCert(t, time.Now().Add(90*24*time.Hour), "gw.example.com")
	preview := newTestCert(t, time.Now().Add(90*24*time.Hour), "*.example-preview.net")
	gw.write(t, filepath.Join(dir, "gw.pem"), filepath.Join(dir, "gw.key"))
	preview.write(t, filepath.Join(dir, "preview.pem"), filepath.Join(dir, "preview.key"))
	var logs testenv.LogBuffer
	ts, err := loadTLSCerts(filepath.Join(dir, "gw.pem")+", "+filepath.Join(dir, "preview.pem"), filepath.Join(dir, "gw.key")+", "+filepath.Join(dir, "preview.key"), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), `msg="TLS certificate loaded"`); n != 2 {
		t.Errorf("%d load lines, want one per certificate:\n%s", n, logs.String())
	}
	served := func(serverName string) *x509.Certificate {
		t.Helper()
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		srv := tls.Server(a, ts.config())
		errc := make(chan error, 1)
		go func() { errc <- srv.Handshake() }()
		c := tls.Client(b, &tls.Config{ServerName: serverName, InsecureSkipVerify: true})
		if err := c.Handshake(); err != nil {
			t.Fatalf("handshake for %q: %v", serverName, err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("server handshake for %q: %v", serverName, err)
		}
		return c.ConnectionState().PeerCertificates[0]
	}
	for _, c := range []struct {
		name string
		want testCert
	}{
		{"gw.example.com", gw},
		{"3000--build-01.example-preview.net", preview},
		{"other.example.org", gw},
		{"", gw},
	} {
		if !served(c.name).Equal(c.want.leaf) {
			t.Errorf("server name %q: got %v, want %v", c.name, served(c.name).DNSNames, c.want.leaf.DNSNames)
		}
	}
	renewed := newTestCert(t, time.Now().Add(90*24*time.Hour), "*.example-preview.net")
	renewed.write(t, filepath.Join(dir, "preview.pem"), filepath.Join(dir, "preview.key"))
	if !served("a.example-preview.net").Equal(renewed.leaf) {
		t.Error("the second certificate's renewal was not taken")
	}
	if !served("gw.example.com").Equal(gw.leaf) {
		t.Error("the first certificate changed with the second's renewal")
	}
}

// A certificate left to near its end is warned of again while it stays
// in service, not only when it was loaded.
func TestTLSFilesExpiryRewarned(t *testing.T) {
	wasRecheck, wasRewarn := tlsRecheck, tlsExpiryRewarn
	tlsRecheck, tlsExpiryRewarn = 0, 0
	t.Cleanup(func() { tlsRecheck, tlsExpiryRewarn = wasRecheck, wasRewarn })
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "privkey.pem")
	newTestCert(t, time.Now().Add(5*24*time.Hour), "gw.example.com").write(t, certFile, keyFile)
	var logs testenv.LogBuffer
	tf, err := loadTLSFiles(certFile, keyFile, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	const again = `level=WARN msg="TLS certificate still in service: the certificate expires in under 14 days`
	tf.current()
	if n := strings.Count(logs.String(), again); n != 1 {
		t.Fatalf("%d warnings after a recheck past the re-warning interval, want 1:\n%s", n, logs.String())
	}
	tlsExpiryRewarn = time.Hour
	tf.current()
	tf.current()
	if n := strings.Count(logs.String(), again); n != 1 {
		t.Errorf("%d warnings within the re-warning interval, want still 1:\n%s", n, logs.String())
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
		{[]string{"--tls-cert", "c,d", "--tls-key", "k"}, "--tls-cert has 2 files and --tls-key 1"},
		{[]string{"--tls-cert", "c,", "--tls-key", "k,l"}, "an empty file name in the list"},
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
	want := `hostgate_tls_certificate_expiry_timestamp_seconds{cert="` + certFile + `"} ` + strconv.FormatFloat(float64(cert.leaf.NotAfter.Unix()), 'e', -1, 64)
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
