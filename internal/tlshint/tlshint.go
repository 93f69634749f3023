// Package tlshint adds the fix to the error of a connection to a gateway
// whose TLS certificate no CA the process trusts has signed: a gateway
// with a certificate from a private CA, whose error said only
// "x509: certificate signed by unknown authority".
package tlshint

import (
	"crypto/x509"
	"errors"
	"fmt"
	"runtime"
)

// Wrap returns err with the fix appended when a certificate of unknown
// authority caused it, and err unchanged otherwise.
func Wrap(err error) error {
	var ua x509.UnknownAuthorityError
	if err == nil || !errors.As(err, &ua) {
		return err
	}
	return fmt.Errorf("%w (%s)", err, fix(runtime.GOOS))
}

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
