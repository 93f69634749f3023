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

// tlsExpiryRewarn is how often an expiring certificate is warned of again
// while it stays in service: a warning at load alone scrolls out of a
// journal days before the certificate ends (a variable for tests).
var tlsExpiryRewarn = 24 * time.Hour

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
	warned  time.Time      // the expiry was last warned of
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
	if !t.warnExpiring(msg, cert) {
		t.logger.Info(msg, t.logArgs(cert)...)
	}
}

func (t *tlsFiles) logArgs(cert *tls.Certificate) []any {
	leaf := cert.Leaf
	return []any{"cert", t.certFile, "names", certNames(leaf), "notAfter", leaf.NotAfter.UTC().Format(time.RFC3339)}
}

// warnExpiring logs msg at Warn or Error when cert is expiring or has
// expired, and reports whether it did.
func (t *tlsFiles) warnExpiring(msg string, cert *tls.Certificate) bool {
	switch left := time.Until(cert.Leaf.NotAfter); {
	case left <= 0:
		t.logger.Error(msg+": the certificate has EXPIRED, and callers refuse it: renew it (the gateway takes the renewed files without a restart)", t.logArgs(cert)...)
	case left < tlsExpiryWarn:
		t.logger.Warn(msg+": the certificate expires in under 14 days (did its renewal fail?): renew it (the gateway takes the renewed files without a restart)", t.logArgs(cert)...)
	default:
		return false
	}
	t.warned = time.Now()
	return true
}

// current is the pair loaded last, loaded again first when a file changed
// since.
func (t *tlsFiles) current() *tls.Certificate {
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(t.checked) < tlsRecheck {
		return t.cert
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
		return t.cert
	}
	if sameFile(seen[0], t.seen[0]) && sameFile(seen[1], t.seen[1]) {
		if time.Since(t.warned) >= tlsExpiryRewarn {
			t.warnExpiring("TLS certificate still in service", t.cert)
		}
		return t.cert
	}
	t.seen = seen
	cert, err := t.load()
	if err != nil {
		// A renewal that writes one file, then the other, is caught
		// between them now and then; the next change loads it.
		t.logger.Warn("TLS certificate: the changed files do not load; serving the certificate loaded before until they change again", "err", err)
		return t.cert
	}
	t.cert = cert
	t.logLoaded("TLS certificate reloaded", cert)
	return cert
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

// tlsCerts is every pair of --tls-cert and --tls-key: a gateway on
// gw.example.com with previews under *.example-preview.net (a domain of
// its own) has two certificates when the CA issued them apart.
type tlsCerts []*tlsFiles

// tlsPairs pairs the comma-separated lists of --tls-cert and --tls-key,
// in order.
func tlsPairs(certFiles, keyFiles string) ([][2]string, error) {
	certs, keys := strings.Split(certFiles, ","), strings.Split(keyFiles, ",")
	if len(certs) != len(keys) {
		return nil, fmt.Errorf("--tls-cert has %d files and --tls-key %d: give each certificate chain its private key, comma-separated in the same order", len(certs), len(keys))
	}
	pairs := make([][2]string, len(certs))
	for i := range certs {
		pairs[i] = [2]string{strings.TrimSpace(certs[i]), strings.TrimSpace(keys[i])}
		if pairs[i][0] == "" || pairs[i][1] == "" {
			return nil, fmt.Errorf("--tls-cert %q, --tls-key %q: an empty file name in the list: want FILE[,FILE…] in each", certFiles, keyFiles)
		}
	}
	return pairs, nil
}

// loadTLSCerts loads every pair of --tls-cert and --tls-key.
func loadTLSCerts(certFiles, keyFiles string, logger *slog.Logger) (tlsCerts, error) {
	pairs, err := tlsPairs(certFiles, keyFiles)
	if err != nil {
		return nil, err
	}
	var out tlsCerts
	for _, p := range pairs {
		t, err := loadTLSFiles(p[0], p[1], logger)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// certificate is tls.Config.GetCertificate, choosing as crypto/tls does
// among Config.Certificates: the first the caller's hello supports (its
// server name, signature schemes), else the first.
func (ts tlsCerts) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	first := ts[0].current()
	if len(ts) == 1 {
		return first, nil
	}
	if hello.SupportsCertificate(first) == nil {
		return first, nil
	}
	for _, t := range ts[1:] {
		if c := t.current(); hello.SupportsCertificate(c) == nil {
			return c, nil
		}
	}
	return first, nil
}

// config is the listener's TLS: HTTP/1.1 only (the tunnels, SSH sessions
// and web terminals are WebSocket upgrades, which Go's server does over
// HTTP/1.1; and HTTP/1.1 is what a TLS-terminating proxy in front would
// have handed the gateway).
func (ts tlsCerts) config() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: ts.certificate,
		NextProtos:     []string{"http/1.1"},
	}
}

// register publishes each loaded certificate's end, labelled with its
// file, for an alert that fires before callers refuse it.
func (ts tlsCerts) register(reg *prometheus.Registry) {
	if reg == nil {
		return
	}
	for _, t := range ts {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "hostgate", Name: "tls_certificate_expiry_timestamp_seconds",
			Help:        "When a certificate the gateway serves (--tls-cert, the label's file) ends, in Unix seconds; the gateway reloads it when its files change.",
			ConstLabels: prometheus.Labels{"cert": t.certFile},
		}, func() float64 { return float64(t.expiry().Unix()) }))
	}
}

// publicURL is the public URL a TLS gateway without --public-url is
// reached at: the first exact name of the certificates, in order (a
// wildcard names no one host), on the listen port unless that is 443.
func (ts tlsCerts) publicURL(listen string) (string, error) {
	var names []string
	for _, t := range ts {
		names = append(names, certNames(t.current().Leaf)...)
	}
	return tlsPublicURL(names, listen)
}

// certNames is the names a certificate is good for.
func certNames(c *x509.Certificate) []string {
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	return names
}

// tlsPublicURL is https:// and the first of names that is not a wildcard
// (callers check the name against it), on the listen port unless that is
// 443.
func tlsPublicURL(names []string, listen string) (string, error) {
	host := ""
	for _, n := range names {
		if !strings.HasPrefix(n, "*.") {
			host = n
			break
		}
	}
	if host == "" {
		return "", fmt.Errorf("the --tls-cert certificates name no exact DNS name or IP address (%v); set --public-url to the URL callers reach the gateway at", names)
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
