package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// tlsRecheck is how often, at most, a TLS handshake looks at whether
// --tls-cert or --tls-key changed (a variable for tests).
var tlsRecheck = 10 * time.Second

// tlsExpiryWarn is how close to its end a loaded certificate is said to
// be expiring: certbot renews at 30 days left, so a certificate this near
// its end is one whose renewal failed.
const tlsExpiryWarn = 14 * 24 * time.Hour

// tlsFiles serves --tls-cert and --tls-key. The pair is loaded at start
// and again when either file changes, so that a renewal (certbot,
// cert-manager, a cron job) is taken without a restart, which would end
// every session and tunnel.
type tlsFiles struct {
	certFile, keyFile string
	logger            *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	checked time.Time      // the files were last looked at
	seen    [2]os.FileInfo // the files as last loaded, or as last failed to load
}

// loadTLSFiles loads the pair, or says which file is wrong and how.
func loadTLSFiles(certFile, keyFile string, logger *slog.Logger) (*tlsFiles, error) {
	t := &tlsFiles{certFile: certFile, keyFile: keyFile, logger: logger}
	seen, err := t.stat()
	if err != nil {
		return nil, err
	}
	cert, err := t.load()
	if err != nil {
		return nil, err
	}
	t.cert, t.seen, t.checked = cert, seen, time.Now()
	t.logLoaded("TLS certificate loaded", cert)
	return t, nil
}

func (t *tlsFiles) stat() ([2]os.FileInfo, error) {
	var out [2]os.FileInfo
	for i, f := range []struct{ flag, path string }{{"--tls-cert", t.certFile}, {"--tls-key", t.keyFile}} {
		fi, err := os.Stat(f.path)
		if err != nil {
			return out, fmt.Errorf("%s %s: %w", f.flag, f.path, err)
		}
		out[i] = fi
	}
	return out, nil
}

// load reads the pair. Its errors name both files and what they must hold:
// crypto/tls says only "private key does not match public key" or "failed
// to find any PEM data in certificate input".
func (t *tlsFiles) load() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(t.certFile, t.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w (want the PEM certificate chain, leaf first, and its PEM private key, as certbot's fullchain.pem and privkey.pem)", t.certFile, t.keyFile, err)
	}
	if cert.Leaf == nil {
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		if err != nil {
			return nil, fmt.Errorf("--tls-cert %s: %w", t.certFile, err)
		}
		cert.Leaf = leaf
	}
	return &cert, nil
}

func (t *tlsFiles) logLoaded(msg string, cert *tls.Certificate) {
	leaf := cert.Leaf
	args := []any{"cert", t.certFile, "names", certNames(leaf), "notAfter", leaf.NotAfter.UTC().Format(time.RFC3339)}
	switch left := time.Until(leaf.NotAfter); {
	case left <= 0:
		t.logger.Error(msg+": the certificate has EXPIRED, and callers refuse it: renew it (the gateway takes the renewed files without a restart)", args...)
	case left < tlsExpiryWarn:
		t.logger.Warn(msg+": the certificate expires in under 14 days (did its renewal fail?): renew it (the gateway takes the renewed files without a restart)", args...)
	default:
		t.logger.Info(msg, args...)
	}
}

// certificate is tls.Config.GetCertificate: the pair loaded last, loaded
// again first when a file changed since.
func (t *tlsFiles) certificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(t.checked) < tlsRecheck {
		return t.cert, nil
	}
	t.checked = time.Now()
	seen, err := t.stat()
	if err != nil {
		// Mid-renewal (a file moved away and back), or deleted: keep
		// serving what was loaded, and say so once per change.
		if t.seen[0] != nil {
			t.logger.Warn("TLS certificate: a file is gone; serving the certificate loaded before", "err", err)
			t.seen = [2]os.FileInfo{}
		}
		return t.cert, nil
	}
	if sameFile(seen[0], t.seen[0]) && sameFile(seen[1], t.seen[1]) {
		return t.cert, nil
	}
	t.seen = seen
	cert, err := t.load()
	if err != nil {
		// A renewal that writes one file, then the other, is caught
		// between them now and then; the next change loads it.
		t.logger.Warn("TLS certificate: the changed files do not load; serving the certificate loaded before until they change again", "err", err)
		return t.cert, nil
	}
	t.cert = cert
	t.logLoaded("TLS certificate reloaded", cert)
	return cert, nil
}

// sameFile reports whether b is the file a was, unchanged: a renewal
// writes new files in place, or (certbot) points a symlink at new ones.
func sameFile(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}

// expiry is the loaded certificate's end, for the metric.
func (t *tlsFiles) expiry() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cert.Leaf.NotAfter
}

// config is the listener's TLS: HTTP/1.1 only (the tunnels, SSH sessions
// and web terminals are WebSocket upgrades, which Go's server does over
// HTTP/1.1; and HTTP/1.1 is what a TLS-terminating proxy in front would
// have handed the gateway).
func (t *tlsFiles) config() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: t.certificate,
		NextProtos:     []string{"http/1.1"},
	}
}

// register publishes the loaded certificate's end, for an alert that
// fires before callers refuse it.
func (t *tlsFiles) register(reg *prometheus.Registry) {
	if reg == nil {
		return
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "hostgate", Name: "tls_certificate_expiry_timestamp_seconds",
		Help: "When the certificate the gateway serves (--tls-cert) ends, in Unix seconds; the gateway reloads it when its files change.",
	}, func() float64 { return float64(t.expiry().Unix()) }))
}

// certNames is the names a certificate is good for.
func certNames(c *x509.Certificate) []string {
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	return names
}

// tlsPublicURL is the public URL a TLS gateway without --public-url is
// reached at: the certificate's first exact name (callers check the name
// against it; a wildcard names no one host), on the listen port unless
// that is 443.
func tlsPublicURL(c *x509.Certificate, listen string) (string, error) {
	host := ""
	for _, n := range certNames(c) {
		if !strings.HasPrefix(n, "*.") {
			host = n
			break
		}
	}
	if host == "" {
		return "", fmt.Errorf("the --tls-cert certificate names no exact DNS name or IP address (%v); set --public-url to the URL callers reach the gateway at", certNames(c))
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("--listen %q: %w", listen, err)
	}
	u := url.URL{Scheme: "https", Host: host}
	if n, _ := strconv.Atoi(port); n != 443 && n != 0 {
		u.Host = net.JoinHostPort(host, port)
	}
	return u.String(), nil
}
