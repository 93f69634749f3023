package sshlayer

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

const fingerprintPrefix = "SHA256:"

// ErrBadFingerprint is returned by ParseFingerprint for a string that is not
// a SHA256 fingerprint as ssh-keygen -lf prints it.
var ErrBadFingerprint = errors.New("sshlayer: malformed host key fingerprint (want SHA256:<43 base64 characters>)")

// Fingerprint returns pub's SHA256 fingerprint the way ssh-keygen -lf prints
// it: "SHA256:" and the unpadded standard base64 of the hash of the wire
// encoding of the key.
func Fingerprint(pub ssh.PublicKey) string { return ssh.FingerprintSHA256(pub) }

// ParseFingerprint validates s as "SHA256:" followed by exactly 43 characters
// of unpadded standard base64 in canonical form, and returns the 32 hash
// bytes. Anything else (other hashes such as MD5, padding, whitespace,
// URL-safe base64, trailing bytes) is ErrBadFingerprint.
func ParseFingerprint(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, fingerprintPrefix)
	if !ok || len(rest) != base64.RawStdEncoding.EncodedLen(sha256.Size) {
		return nil, ErrBadFingerprint
	}
	// Strict rejects non-zero padding bits, so every hash has exactly one
	// spelling and string comparison of valid fingerprints is meaningful.
	b, err := base64.RawStdEncoding.Strict().DecodeString(rest)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("%w: %q", ErrBadFingerprint, s)
	}
	return b, nil
}
