package gateway

import (
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// TestCertificateEndsWithItsToken: a certificate issued to a token that
// expires before the certificate lifetime is over ends when the token
// does. An agent's --trusted-ca listener checks the certificate alone,
// so one valid past its token's expiry let the holder of an expired
// token in for the rest of the lifetime (--cert-ttl, up to a day).
func TestCertificateEndsWithItsToken(t *testing.T) {
	e := newEnv(t, &Config{CertTTL: time.Hour})
	_, hostKey := newKey(t)
	e.pin("a", hostKey)
	expires := time.Now().Add(5 * time.Minute)
	secret, _, err := e.store.CreateToken(e.ctx, store.TokenSpec{Role: store.RoleClient, Hosts: []string{"a"}, ExpiresAt: expires})
	if err != nil {
		t.Fatal(err)
	}
	_, userPub := newKey(t)
	var res certResponse
	if code, c := e.call("POST", "/v1/hosts/a/certificates", secret, certRequest{PublicKey: userPub}, &res); code != 200 {
		t.Fatalf("sign: %d %s", code, c)
	}
	pk, _, _, _, err := ssh.ParseAuthorizedKey([]byte(res.Certificate))
	if err != nil {
		t.Fatal(err)
	}
	cert := pk.(*ssh.Certificate)
	if vb := time.Unix(int64(cert.ValidBefore), 0); vb.After(expires) {
		t.Errorf("certificate valid until %v, past its token's expiry %v", vb.UTC(), expires.UTC())
	}
	if res.ValidBefore.After(expires) {
		t.Errorf("validBefore %v, past the token's expiry %v", res.ValidBefore, expires.UTC())
	}
	// A token that does not expire keeps the configured lifetime.
	admin := e.token(store.RoleAdmin)
	if code, c := e.call("POST", "/v1/hosts/a/certificates", admin, certRequest{PublicKey: userPub}, &res); code != 200 {
		t.Fatalf("sign: %d %s", code, c)
	}
	if d := time.Until(res.ValidBefore); d < 59*time.Minute {
		t.Errorf("a token without expiry: certificate valid for %v, want the hour configured", d)
	}
}
