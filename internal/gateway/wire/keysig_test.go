package wire

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

func newSigner(t testing.TB) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestKeySignature: a signature verifies for the key, token and host id
// it was made for, within the skew, and for nothing else.
func TestKeySignature(t *testing.T) {
	s, other := newSigner(t), newSigner(t)
	now := time.Unix(1_800_000_000, 0)
	v, err := SignKey(s, "tok", "h1", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyKeySignature(s.PublicKey(), v, "tok", "h1", now.Add(time.Minute)); err != nil {
		t.Fatalf("a good signature: %v", err)
	}
	for name, tc := range map[string]struct {
		pub        ssh.PublicKey
		value, tok string
		host, want string
		at         time.Time
	}{
		"another key":   {other.PublicKey(), v, "tok", "h1", "not by the presented key", now},
		"another token": {s.PublicKey(), v, "tok2", "h1", "not by the presented key", now},
		"another host":  {s.PublicKey(), v, "tok", "h2", "not by the presented key", now},
		"too old":       {s.PublicKey(), v, "tok", "h1", "check the agent's clock", now.Add(6 * time.Minute)},
		"too new":       {s.PublicKey(), v, "tok", "h1", "check the agent's clock", now.Add(-6 * time.Minute)},
		"padded time":   {s.PublicKey(), "0" + v, "tok", "h1", "want Unix seconds", now},
		"no dot":        {s.PublicKey(), "123", "tok", "h1", "want UNIX_SECONDS.SIGNATURE", now},
		"bad base64":    {s.PublicKey(), "1800000000.!!", "tok", "h1", "key signature", now},
		"too long":      {s.PublicKey(), "1800000000." + strings.Repeat("A", 5000), "tok", "h1", "too long", now},
		// The time is part of what is signed: moving it breaks the
		// signature, not only the skew check.
		"time moved": {s.PublicKey(), "1800000001" + v[strings.Index(v, "."):], "tok", "h1", "not by the presented key", now},
	} {
		err := VerifyKeySignature(tc.pub, tc.value, tc.tok, tc.host, tc.at)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}

func FuzzVerifyKeySignature(f *testing.F) {
	s := newSigner(f)
	now := time.Unix(1_800_000_000, 0)
	v, err := SignKey(s, "tok", "h1", now)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(v)
	f.Add("1800000000.")
	f.Add(".")
	f.Fuzz(func(t *testing.T, value string) {
		if VerifyKeySignature(s.PublicKey(), value, "tok", "h1", now) == nil && value != v {
			// Only a signature this key made verifies; ed25519's is
			// deterministic, so only v itself.
			t.Fatalf("%q verified", value)
		}
	})
}
