package gateway

import (
	"crypto/rsa"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// rsaKeyOfBits is an RSA public key whose modulus has exactly bits bits,
// in authorized_keys form. Only its size matters here: the gateway signs
// a certificate for a key without checking that it is a product of two
// primes.
func rsaKeyOfBits(t *testing.T, bits int) string {
	t.Helper()
	n := new(big.Int).Lsh(big.NewInt(1), uint(bits-1))
	n.SetBit(n, 0, 1)
	pub, err := ssh.NewPublicKey(&rsa.PublicKey{N: n, E: 65537})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))
}

// TestShortRSAKeysRefused: an RSA key under 2048 bits is refused by its
// modulus' bits. Its size was counted in whole bytes, so a 2041 to 2047
// bit key counted as 2048 and was certified.
func TestShortRSAKeysRefused(t *testing.T) {
	e := newEnv(t, nil)
	_, hostKey := newKey(t)
	e.pin("a", hostKey)
	client := e.token(store.RoleClient, "a")
	for _, tc := range []struct {
		bits int
		want int
	}{{2041, 400}, {2047, 400}, {2048, 200}} {
		t.Run(fmt.Sprint(tc.bits), func(t *testing.T) {
			code, c := e.call("POST", "/v1/hosts/a/certificates", client, certRequest{PublicKey: rsaKeyOfBits(t, tc.bits)}, nil)
			if code != tc.want {
				t.Fatalf("a certificate for a %d-bit RSA key: %d %s, want %d", tc.bits, code, c, tc.want)
			}
		})
	}
}
