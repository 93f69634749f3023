package sshlayer

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/testenv"
)

func TestFingerprintMatchesSSHKeygen(t *testing.T) {
	keygen, err := exec.LookPath("ssh-keygen")
	testenv.RequirePeer(t, "OpenSSH ssh-keygen", err == nil)
	k, err := GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	pubFile := filepath.Join(t.TempDir(), "id.pub")
	if err := os.WriteFile(pubFile, []byte(k.PublicKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(keygen, "-lf", pubFile).Output()
	if err != nil {
		t.Fatal(err)
	}
	// "256 SHA256:… comment (ED25519)"
	fields := strings.Fields(string(out))
	if len(fields) < 2 {
		t.Fatalf("ssh-keygen -lf printed %q", out)
	}
	got := Fingerprint(k.Signer.PublicKey())
	if got != fields[1] {
		t.Errorf("Fingerprint %q, ssh-keygen %q", got, fields[1])
	}
	if _, err := ParseFingerprint(got); err != nil {
		t.Errorf("ParseFingerprint(Fingerprint(k)): %v", err)
	}
	// ssh-keygen reads the private key we wrote back to the same public key.
	privFile := filepath.Join(t.TempDir(), "id")
	if err := os.WriteFile(privFile, k.PrivateKey, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(keygen, "-y", "-f", privFile).Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Fields(string(out))[1] != strings.Fields(k.PublicKey)[1] {
		t.Errorf("ssh-keygen -y: %q, want %q", out, k.PublicKey)
	}
}

func TestParseFingerprint(t *testing.T) {
	sum := sha256.Sum256([]byte("key"))
	good := "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
	b, err := ParseFingerprint(good)
	if err != nil || !bytes.Equal(b, sum[:]) {
		t.Fatalf("ParseFingerprint(%q) = %x, %v", good, b, err)
	}
	// The last character carries 4 hash bits and 2 padding bits; the next
	// alphabet letter has the same hash bits and a non-zero padding bit.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	nonCanonical := alphabet[strings.IndexByte(alphabet, good[len(good)-1])+1]
	for _, bad := range []string{
		"", "SHA256:", "sha256:" + good[7:], "MD5:" + good[7:], good + "=", good + " ", " " + good, good[:len(good)-1],
		good + "A", "SHA256:" + base64.RawURLEncoding.EncodeToString(sum[:]) + "-",
		good[:len(good)-1] + string(nonCanonical), "SHA256:" + strings.Repeat("!", 43),
		"SHA256:" + base64.StdEncoding.EncodeToString(sum[:]),
	} {
		if bad == good {
			continue
		}
		if _, err := ParseFingerprint(bad); err == nil {
			t.Errorf("ParseFingerprint(%q) accepted", bad)
		}
	}
}

func FuzzParseFingerprint(f *testing.F) {
	sum := sha256.Sum256(nil)
	f.Add("SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:]))
	f.Add("SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU")
	f.Add("SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFV")
	f.Add("MD5:16:27:ac:a5:76:28:2d:36:63:1b:56:4d:eb:df:a6:48")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseFingerprint(s)
		if err != nil {
			return
		}
		// Accepted means canonical: exactly one spelling per hash.
		if len(b) != sha256.Size {
			t.Fatalf("%q: %d bytes", s, len(b))
		}
		if again := "SHA256:" + base64.RawStdEncoding.EncodeToString(b); again != s {
			t.Fatalf("%q accepted but re-encodes as %q", s, again)
		}
	})
}

// FuzzParseHostKeyPin reads the host key the gateway names for a host (a
// fingerprint or a public key line): the pin is the SHA-256 of the key it
// names, and that key's fingerprint reads back as the same pin; a
// certificate, options or anything after the key are refused.
func FuzzParseHostKeyPin(f *testing.F) {
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	pub, _ := ssh.NewPublicKey(edPub)
	line := string(ssh.MarshalAuthorizedKey(pub))
	f.Add(line)
	f.Add(strings.TrimSpace(line) + " root@web-1")
	f.Add(Fingerprint(pub))
	f.Add(Fingerprint(pub) + "=")
	f.Add(`command="x" ` + line)
	f.Add(line + line)
	f.Add("ssh-ed25519 AAAA")
	f.Fuzz(func(t *testing.T, s string) {
		want, key, err := parseHostKeyPin(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("refusal without a message")
			}
			return
		}
		if len(want) != sha256.Size {
			t.Fatalf("%q pinned as %d bytes", s, len(want))
		}
		if key == nil {
			if again, err := ParseFingerprint(s); err != nil || !bytes.Equal(again, want) || "SHA256:"+base64.RawStdEncoding.EncodeToString(want) != s {
				t.Fatalf("fingerprint %q pinned as %x", s, want)
			}
			return
		}
		if _, isCert := key.(*ssh.Certificate); isCert {
			t.Fatalf("certificate %q pinned", s)
		}
		sum := sha256.Sum256(key.Marshal())
		if !bytes.Equal(want, sum[:]) {
			t.Fatalf("%q pinned as %x, its key hashes to %x", s, want, sum)
		}
		if again, err := ParseFingerprint(Fingerprint(key)); err != nil || !bytes.Equal(again, want) {
			t.Fatalf("the fingerprint of %q reads as %x (%v), pinned %x", s, again, err, want)
		}
	})
}
