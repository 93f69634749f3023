package previewauth

import (
	"errors"
	"testing"
	"time"
)

func TestTicketSingleUseBoundAndExpiring(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	s := New(func() time.Time { return now })
	tk := s.Ticket("alice", "local", 3000, time.Minute)
	if _, err := s.Redeem(tk, "local", 3001); !errors.Is(err, ErrInvalid) {
		t.Errorf("other port: %v", err)
	}
	if _, err := s.Redeem(tk, "other", 3000); !errors.Is(err, ErrInvalid) {
		t.Errorf("other host: %v", err)
	}
	who, err := s.Redeem(tk, "local", 3000)
	if err != nil || who != "alice" {
		t.Fatalf("redeem: %q %v", who, err)
	}
	if _, err := s.Redeem(tk, "local", 3000); !errors.Is(err, ErrInvalid) {
		t.Errorf("second use: %v", err)
	}
	tk2 := s.Ticket("alice", "local", 3000, time.Minute)
	now = now.Add(2 * time.Minute)
	if _, err := s.Redeem(tk2, "local", 3000); !errors.Is(err, ErrInvalid) {
		t.Errorf("expired: %v", err)
	}
}

func TestCookieForgeryRefused(t *testing.T) {
	s := New(nil)
	c, _ := s.Cookie("bob", "h1", 8080, time.Hour)
	if who, err := s.CheckCookie(c, "h1", 8080); err != nil || who != "bob" {
		t.Fatalf("check: %q %v", who, err)
	}
	if _, err := s.CheckCookie(c, "h1", 8081); err == nil {
		t.Error("cookie for another port accepted")
	}
	other := New(nil)
	c2, _ := other.Cookie("bob", "h1", 8080, time.Hour)
	if _, err := s.CheckCookie(c2, "h1", 8080); err == nil {
		t.Error("cookie signed by another key accepted")
	}
	// A ticket is not a cookie.
	if _, err := s.CheckCookie(s.Ticket("bob", "h1", 8080, time.Hour), "h1", 8080); err == nil {
		t.Error("ticket accepted as cookie")
	}
	tampered := []byte(c)
	tampered[3] ^= 1
	if _, err := s.CheckCookie(string(tampered), "h1", 8080); err == nil {
		t.Error("tampered cookie accepted")
	}
}

func FuzzCheckCookie(f *testing.F) {
	s := New(nil)
	c, _ := s.Cookie("bob", "h1", 8080, time.Hour)
	f.Add(c)
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, v string) {
		_, _ = s.CheckCookie(v, "h1", 8080)
		_, _ = s.Redeem(v, "h1", 8080)
	})
}

// A cookie outlives its Signer when the next one has the same cookie key
// (the gateway restarted): a page's own requests, a dev server's hot
// reload among them, cannot log in again. Tickets do not: which were used
// is known only to the Signer that saw them. Another key takes neither.
func TestCookieKeyOutlivesSigner(t *testing.T) {
	key := make([]byte, KeySize)
	key[0] = 1
	before, err := NewKeyed(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := before.Cookie("alice", "local", 3000, time.Hour)
	tk := before.Ticket("alice", "local", 3000, time.Minute)
	if _, err := before.Redeem(tk, "local", 3000); err != nil {
		t.Fatal(err)
	}
	after, err := NewKeyed(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if who, err := after.CheckCookie(c, "local", 3000); err != nil || who != "alice" {
		t.Errorf("the cookie after a restart with the same key: %q %v, want alice", who, err)
	}
	if _, err := after.Redeem(tk, "local", 3000); !errors.Is(err, ErrInvalid) {
		t.Errorf("a used ticket after a restart: %v, want refused", err)
	}
	key[0] = 2
	other, _ := NewKeyed(key, nil)
	if _, err := other.CheckCookie(c, "local", 3000); !errors.Is(err, ErrInvalid) {
		t.Errorf("the cookie under another key: %v, want refused", err)
	}
	if _, err := NewKeyed(key[:16], nil); err == nil {
		t.Error("a 16-byte key taken")
	}
}
