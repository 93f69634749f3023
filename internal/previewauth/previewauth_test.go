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
