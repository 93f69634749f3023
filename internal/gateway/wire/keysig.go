package wire

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// HeaderKeySignature, in the request, proves the agent holds the host key
// it presents: "UNIX_SECONDS.SIGNATURE", the signature (base64url of an
// SSH signature blob) by that key over KeySignatureMessage. A gateway
// that has not pinned the key pins it on a good one, with no SSH key
// exchange first (HeaderKeyProof); without one, or with one it cannot
// use, it asks for the exchange.
//
// A signature names the token it came with and its time, so a copy is of
// no use with another token, or after KeySignatureSkew; and whoever
// replays one within those pins the very key that made it, which its
// holder serves: the attack the proof stops is pinning a key one lacks.
const HeaderKeySignature = "X-Hostgate-Key-Signature"

// KeySignatureSkew is how far a signature's time may be from the
// gateway's clock, either way.
const KeySignatureSkew = 5 * time.Minute

// maxKeySignatureLen bounds the header: an SSH signature blob of the
// largest key the gateway takes (RSA 8192) is about 1.1 KB.
const maxKeySignatureLen = 4096

// KeySignatureMessage is what HeaderKeySignature signs: a fixed purpose,
// the SHA-256 of the bearer token, the host id the request names (empty
// when it names none) and the time in Unix seconds.
func KeySignatureMessage(token, hostID string, unix int64) []byte {
	sum := sha256.Sum256([]byte(token))
	return fmt.Appendf(nil, "hostgate-agent-key-proof-v1\x00%x\x00%s\x00%d", sum, hostID, unix)
}

// SignKey makes HeaderKeySignature's value for signer's key.
func SignKey(signer ssh.Signer, token, hostID string, now time.Time) (string, error) {
	sig, err := signer.Sign(rand.Reader, KeySignatureMessage(token, hostID, now.Unix()))
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(now.Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString(ssh.Marshal(sig)), nil
}

// VerifyKeySignature checks HeaderKeySignature's value: a signature by
// pub over the message for token and hostID, made within
// KeySignatureSkew of now.
func VerifyKeySignature(pub ssh.PublicKey, value, token, hostID string, now time.Time) error {
	if len(value) > maxKeySignatureLen {
		return errors.New("key signature too long")
	}
	ts, b64, ok := strings.Cut(value, ".")
	if !ok {
		return errors.New("key signature: want UNIX_SECONDS.SIGNATURE")
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || strconv.FormatInt(unix, 10) != ts {
		return fmt.Errorf("key signature time %q: want Unix seconds in decimal", ts)
	}
	if d := now.Sub(time.Unix(unix, 0)); d > KeySignatureSkew || d < -KeySignatureSkew {
		return fmt.Errorf("key signature made %v from the gateway's clock (at most %v): check the agent's clock", d.Round(time.Second), KeySignatureSkew)
	}
	blob, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil {
		return fmt.Errorf("key signature: %w", err)
	}
	var sig ssh.Signature
	if err := ssh.Unmarshal(blob, &sig); err != nil {
		return fmt.Errorf("key signature: %w", err)
	}
	if err := pub.Verify(KeySignatureMessage(token, hostID, unix), &sig); err != nil {
		return fmt.Errorf("key signature: not by the presented key: %w", err)
	}
	return nil
}
