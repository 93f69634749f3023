package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hostgate/hostgate/forward"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/previewauth"
	"github.com/hostgate/hostgate/internal/store"
)

// A login ticket redeemed while the gateway cannot tell whether its token
// lives is answered 503 (forward.ErrUnavailable), which asks the browser
// to try again: the ticket must still be good then. It was consumed
// before the token was looked up, so the retry got 401 "invalid or
// expired". Once redeemed it is consumed, and a revoked token's ticket
// stays refused.
func TestRedeemTicketKeptWhileTokensUnknown(t *testing.T) {
	ctx := context.Background()
	signer := previewauth.New(nil)
	var (
		unknown = true
		dead    = map[string]bool{}
	)
	live := func(_ context.Context, id string) (store.Token, bool, error) {
		if unknown {
			return store.Token{}, false, fmt.Errorf("%w: test", gateway.ErrTokensUnknown)
		}
		return store.Token{ID: id}, !dead[id], nil
	}
	redeem := redeemTicket(signer, live)

	ticket := signer.Ticket("tok", "h1", 3000, time.Minute)
	if _, _, err := redeem(ctx, ticket, "h1", 3000); !errors.Is(err, forward.ErrUnavailable) {
		t.Fatalf("redeem with the token's state unknown: %v, want forward.ErrUnavailable", err)
	}
	unknown = false
	v, exp, err := redeem(ctx, ticket, "h1", 3000)
	if err != nil {
		t.Fatalf("the same ticket once the token is known to live: %v", err)
	}
	if who, err := signer.CheckCookie(v, "h1", 3000); err != nil || who != "tok" || !exp.After(time.Now()) {
		t.Fatalf("cookie %q (expires %v): %q, %v", v, exp, who, err)
	}
	if _, _, err := redeem(ctx, ticket, "h1", 3000); !errors.Is(err, previewauth.ErrInvalid) {
		t.Fatalf("a redeemed ticket again: %v, want previewauth.ErrInvalid", err)
	}

	dead["gone"] = true
	revoked := signer.Ticket("gone", "h1", 3000, time.Minute)
	if _, _, err := redeem(ctx, revoked, "h1", 3000); err == nil || errors.Is(err, forward.ErrUnavailable) {
		t.Fatalf("a revoked token's ticket: %v, want a refusal", err)
	}
	if _, _, err := redeem(ctx, signer.Ticket("tok", "h1", 3000, time.Minute), "h1", 3001); !errors.Is(err, previewauth.ErrInvalid) {
		t.Fatalf("a ticket for another port: %v, want previewauth.ErrInvalid", err)
	}
}
