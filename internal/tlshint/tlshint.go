// Package tlshint adds the fix to the error of a connection to a gateway
// whose TLS certificate no CA the process trusts has signed: a gateway
// with a certificate from a private CA, whose error said only
// "x509: certificate signed by unknown authority".
package tlshint

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"runtime"
)

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

// fix says how to trust a private CA on goos. Go reads SSL_CERT_FILE in
// place of the system roots on Linux and the BSDs only: macOS and Windows
// verify with the system's own store.
func fix(goos string) string {
	switch goos {
	case "darwin", "ios", "windows":
		return "if the gateway's certificate comes from a private CA, add that CA to the system's trust store"
	}
	return "if the gateway's certificate comes from a private CA, set SSL_CERT_FILE to that CA's PEM file"
}
