package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/metrics"
)

// ErrLoginRefused is a login with what is not a token a person may log in
// with: unknown, expired (then it wraps store.ErrExpired too) or an
// agent's.
var ErrLoginRefused = errors.New("gateway: login refused")

// ErrLoginLimited is a login from a source whose failed authentications
// hit the rate limit: it is refused whatever the token, a valid one too,
// until the window ends. Told apart from ErrLoginRefused so that a person
// who mistyped a few times is not told their right token is wrong.
var ErrLoginLimited = errors.New("gateway: too many failed authentications from this address")

// StartSession logs a browser in with secret, the API token typed into
// the login form of r, and returns the secret of a new session token for
// the browser's cookie, so that a logout can revoke what the cookie holds
// without revoking the API token. The token is checked as a bearer token
// is, so a wrong one counts against r's source. The session lasts ttl at
// most (never past the token's expiry). Errors: ErrLoginRefused,
// ErrLoginLimited, store.ErrSessionParent for a session's own secret, and
// any other when the gateway could not look the token up.
func (s *Server) StartSession(r *http.Request, secret string, ttl time.Duration) (string, store.Token, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+secret)
	tok, err := s.Authenticate(r)
	var ae *authError
	switch {
	case err == nil:
	case errors.As(err, &ae) && ae.status == http.StatusTooManyRequests:
		return "", store.Token{}, fmt.Errorf("%w: %w", ErrLoginLimited, err)
	case errors.As(err, &ae) && ae.reason == metrics.ReasonExpired:
		return "", store.Token{}, fmt.Errorf("%w: %w: %w", ErrLoginRefused, store.ErrExpired, err)
	case errors.As(err, &ae) && ae.status == http.StatusUnauthorized:
		return "", store.Token{}, fmt.Errorf("%w: %w", ErrLoginRefused, err)
	default:
		// The store or the gateway's shutdown: not the token's fault.
		return "", store.Token{}, err
	}
	if tok.Role == store.RoleAgent {
		return "", store.Token{}, fmt.Errorf("%w: an agent token cannot log in", ErrLoginRefused)
	}
	sec, sess, err := s.store.CreateSession(r.Context(), tok.ID, ttl)
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrExpired):
		// Revoked or expired since the auth cache last asked the store.
		return "", store.Token{}, fmt.Errorf("%w: %w", ErrLoginRefused, err)
	case err != nil:
		return "", store.Token{}, err
	}
	return sec, sess, nil
}

// EndSession revokes the browser session whose secret a logout presents
// and ends what it opened at once: the auth cache and the token snapshot
// forget it (the API, the UI and its preview cookies refuse it from the
// next request) and its web terminals are cut now, not at the next
// recheck. The secret of a token that is not a session is left alone: a
// cookie set before sessions existed holds the API token itself, which a
// logout must not revoke. An unknown secret is already logged out.
func (s *Server) EndSession(ctx context.Context, secret string) error {
	tok, err := s.store.LookupToken(ctx, secret)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil && !errors.Is(err, store.ErrExpired):
		return fmt.Errorf("gateway: end session: %w", err)
	case tok.Parent == "":
		return nil
	}
	if err := s.store.DeleteToken(ctx, tok.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("gateway: end session: %w", err)
	}
	s.auth.drop(tok.ID)
	s.tokenSet.drop(tok.ID)
	s.live.end(tok.ID, "revoked by a logout")
	return nil
}
