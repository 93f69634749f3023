package store

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// TokenPrefix starts every token so that leaked tokens are recognisable by
// secret scanners and a pasted value is easy to tell apart from other keys.
const TokenPrefix = "hg_"

// MaxTokenLen bounds the token a peer may present; a real one is ~46 bytes.
const MaxTokenLen = 256

// newSecret returns a fresh token: 32 random bytes, base64url.
func newSecret() string {
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(randBytes(32))
}

// newID returns a short random identifier for token rows.
func newID() string { return hex.EncodeToString(randBytes(6)) }

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return b
}

// HashToken is the stored form of a token: hex SHA-256. Tokens have 256
// bits of entropy, so a plain hash suffices (no password stretching).
func HashToken(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// wellFormed rejects what can't be a token before touching the database.
func wellFormed(secret string) bool {
	return len(secret) > len(TokenPrefix) && len(secret) <= MaxTokenLen && strings.HasPrefix(secret, TokenPrefix)
}

// MaxTokenNameLen bounds a token's name, which every certificate issued
// to it carries as its key id and every audit row names.
const MaxTokenNameLen = 128

// checkTokenName refuses a name that is not one line of printable text:
// `gateway token list` prints names as they are, so a newline or tab in
// one printed rows of its own (another token, another role), and an
// escape, commands to the admin's terminal; the name is also the key id
// of its certificates, which agents' logs print.
func checkTokenName(name string) error {
	if len(name) > MaxTokenNameLen {
		return fmt.Errorf("store: token name of %d bytes: want at most %d", len(name), MaxTokenNameLen)
	}
	if !utf8.ValidString(name) || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return fmt.Errorf("store: token name %q: want printable text, without control characters, tabs or newlines", name)
	}
	return nil
}
