package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// SelfSigned makes a self-signed TLS server certificate for names (DNS
// names, or IP addresses) valid until notAfter, as PEM, with its parsed
// leaf: what a gateway serving TLS itself is given in a test, and what a
// caller trusts for it.
func SelfSigned(t testing.TB, notAfter time.Time, names ...string) (certPEM, keyPEM []byte, leaf *x509.Certificate) {
	t.Helper()
	certPEM, keyPEM, leaf, err := MakeSelfSigned(notAfter, names...)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM, leaf
}

// MakeSelfSigned is SelfSigned for a program (the bench harness's TLS
// gateway): the error returned, not a test failed.
func MakeSelfSigned(notAfter time.Time, names ...string) (certPEM, keyPEM []byte, leaf *x509.Certificate, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "hostgate test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	if leaf, err = x509.ParseCertificate(der); err != nil {
		return nil, nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), leaf, nil
}
