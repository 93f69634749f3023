// Package tlshint is how hostgate's programs trust a gateway's TLS
// certificate: the --ca-file flag's pool, and the fix added to the error
// of a connection to a gateway whose certificate no CA the process trusts
// has signed (a private CA, a self-signed certificate), whose error said
// only "x509: certificate signed by unknown authority".
package tlshint

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"runtime"
)

// CAFile is --ca-file: the system's CAs and the PEM certificates in path
// (a private CA, or a gateway's self-signed certificate, which is its own
// CA). A file with no certificate in it is an error that says so, not a
// pool that trusts nothing more.
func CAFile(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	n := 0
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("--ca-file %s: certificate %d: %w", path, n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it (want the CA's certificate, -----BEGIN CERTIFICATE-----, or the gateway's self-signed one)", path)
	}
	return pool, nil
}

// Wrap returns err with the fix appended when a certificate of unknown
// authority caused it, or an https:// or wss:// URL naming a port that
// answers without TLS (the gateway's own --listen behind its proxy: "tls:
// first record does not look like a TLS handshake"), and err unchanged
// otherwise.
func Wrap(err error) error {
	var ua x509.UnknownAuthorityError
	var rh tls.RecordHeaderError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ua):
		return fmt.Errorf("%w (%s)", err, fix(runtime.GOOS))
	case errors.As(err, &rh):
		return fmt.Errorf("%w (%s)", err, noTLS)
	}
	return err
}

// noTLS is the fix for a URL whose port does not speak TLS.
const noTLS = "that port does not speak TLS: use an http:// URL for it, or the https:// URL of the TLS proxy in front of the gateway"

// fix says how to trust a private CA, or a self-signed certificate, on
// goos. Go reads SSL_CERT_FILE in place of the system roots on Linux and
// the BSDs only: macOS and Windows verify with the system's own store.
func fix(goos string) string {
	const own = "if the gateway's certificate comes from a private CA or is self-signed, trust that CA's (or the certificate's) PEM file: --ca-file FILE for agent connect, gateway proxy and gateway cert, client.Options.RootCAs in Go"
	switch goos {
	case "darwin", "ios", "windows":
		return own + ", or the system's trust store"
	}
	return own + ", or SSL_CERT_FILE (which replaces the system's CAs)"
}
