// Package previewauth mints and checks the two credentials of subdomain
// previews: a login ticket (short-lived, single-use, bound to one host and
// port, minted on the gateway's origin for a logged-in person) and the
// preview cookie it is exchanged for on the preview origin. Both are
// HMAC-signed. Tickets with a key that lives in memory: which were used is
// known only there, so a restart ends them rather than let one be used
// again. Cookies with the key the gateway keeps (NewKeyed), so a restart
// does not log previews out: a page's own requests (a dev server's hot
// reload) cannot log in again, and failed until a person reloaded.
package previewauth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrInvalid is returned for a credential that is malformed, forged,
// expired, reused or for another host or port.
var ErrInvalid = errors.New("previewauth: invalid credential")

// Signer mints and checks tickets and cookies.
type Signer struct {
	ticketKey []byte
	cookieKey []byte
	now       func() time.Time

	mu   sync.Mutex
	used map[string]time.Time // redeemed ticket nonces until their expiry
}

// KeySize is the size of a cookie key (NewKeyed).
const KeySize = 32

// New returns a Signer with fresh random keys: its cookies end with it.
// now may be nil.
func New(now func() time.Time) *Signer {
	key := make([]byte, KeySize)
	_, _ = rand.Read(key)
	s, _ := NewKeyed(key, now)
	return s
}

// NewKeyed returns a Signer whose cookies are signed with cookieKey (KeySize
// bytes, secret): another Signer with the same key, such as the gateway's
// after a restart, takes them. Tickets get a fresh key. now may be nil.
func NewKeyed(cookieKey []byte, now func() time.Time) (*Signer, error) {
	if len(cookieKey) != KeySize {
		return nil, fmt.Errorf("previewauth: a cookie key of %d bytes, want %d", len(cookieKey), KeySize)
	}
	if now == nil {
		now = time.Now
	}
	ticketKey := make([]byte, KeySize)
	_, _ = rand.Read(ticketKey)
	return &Signer{ticketKey: ticketKey, cookieKey: bytes.Clone(cookieKey), now: now, used: map[string]time.Time{}}, nil
}

// Ticket mints a login ticket for who to reach port on hostID, valid for ttl.
func (s *Signer) Ticket(who, hostID string, port int, ttl time.Duration) string {
	nonce := make([]byte, 12)
	_, _ = rand.Read(nonce)
	return s.sign("t", base64.RawURLEncoding.EncodeToString(nonce), who, hostID, strconv.Itoa(port), strconv.FormatInt(s.now().Add(ttl).Unix(), 10))
}

// Redeem checks a ticket for hostID and port, consumes it, and returns who
// it was minted for.
func (s *Signer) Redeem(ticket, hostID string, port int) (string, error) {
	return s.ticket(ticket, hostID, port, true)
}

// Peek is Redeem without consuming the ticket: who it was minted for, if
// Redeem would take it now. A caller that must check more before it
// redeems (the token still lives) peeks first, so that a check it cannot
// make yet leaves the ticket good for a retry.
func (s *Signer) Peek(ticket, hostID string, port int) (string, error) {
	return s.ticket(ticket, hostID, port, false)
}

func (s *Signer) ticket(ticket, hostID string, port int, consume bool) (string, error) {
	f, err := s.verify(ticket, "t", 6)
	if err != nil {
		return "", err
	}
	nonce, who, h, p, exp := f[1], f[2], f[3], f[4], f[5]
	expiry, err := s.check(h, p, exp, hostID, port)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !consume {
		if _, dup := s.used[nonce]; dup {
			return "", fmt.Errorf("%w: ticket already used", ErrInvalid)
		}
		return who, nil
	}
	now := s.now()
	for n, e := range s.used {
		if now.After(e) {
			delete(s.used, n)
		}
	}
	if _, dup := s.used[nonce]; dup {
		return "", fmt.Errorf("%w: ticket already used", ErrInvalid)
	}
	s.used[nonce] = expiry
	return who, nil
}

// Cookie mints the preview cookie's value for who on hostID:port.
func (s *Signer) Cookie(who, hostID string, port int, ttl time.Duration) (string, time.Time) {
	exp := s.now().Add(ttl)
	return s.sign("c", who, hostID, strconv.Itoa(port), strconv.FormatInt(exp.Unix(), 10)), exp
}

// CheckCookie checks a preview cookie for hostID and port and returns who.
func (s *Signer) CheckCookie(value, hostID string, port int) (string, error) {
	f, err := s.verify(value, "c", 5)
	if err != nil {
		return "", err
	}
	if _, err := s.check(f[2], f[3], f[4], hostID, port); err != nil {
		return "", err
	}
	return f[1], nil
}

func (s *Signer) check(h, p, exp, hostID string, port int) (time.Time, error) {
	if h != hostID || p != strconv.Itoa(port) {
		return time.Time{}, fmt.Errorf("%w: for another preview", ErrInvalid)
	}
	sec, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return time.Time{}, ErrInvalid
	}
	expiry := time.Unix(sec, 0)
	if !s.now().Before(expiry) {
		return time.Time{}, fmt.Errorf("%w: expired", ErrInvalid)
	}
	return expiry, nil
}

// sign joins fields (each base64url-encoded so none can smuggle a
// separator) and appends their MAC.
func (s *Signer) sign(fields ...string) string {
	enc := make([]string, len(fields))
	for i, f := range fields {
		enc[i] = base64.RawURLEncoding.EncodeToString([]byte(f))
	}
	body := strings.Join(enc, ".")
	return body + "." + base64.RawURLEncoding.EncodeToString(s.mac(fields[0], body))
}

func (s *Signer) verify(v, kind string, n int) ([]string, error) {
	if len(v) > 4096 {
		return nil, ErrInvalid
	}
	parts := strings.Split(v, ".")
	if len(parts) != n+1 {
		return nil, ErrInvalid
	}
	body := strings.Join(parts[:n], ".")
	sig, err := base64.RawURLEncoding.DecodeString(parts[n])
	if err != nil || !hmac.Equal(sig, s.mac(kind, body)) {
		return nil, ErrInvalid
	}
	out := make([]string, n)
	for i := range n {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return nil, ErrInvalid
		}
		out[i] = string(b)
	}
	if out[0] != kind {
		return nil, ErrInvalid
	}
	return out, nil
}

// mac signs body with the key of its kind ("t" a ticket, "c" a cookie).
func (s *Signer) mac(kind, body string) []byte {
	key := s.ticketKey
	if kind == "c" {
		key = s.cookieKey
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	return m.Sum(nil)
}
