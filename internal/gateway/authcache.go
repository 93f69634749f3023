package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/hostgate/hostgate/internal/store"
)

// authCacheTTL bounds how long a token that authenticated is trusted again
// without asking the store. Every request authenticates, and a store
// lookup (a SQLite read) cost the gateway about 20 µs of CPU: more than
// the rest of a preview request's handler, whose page loads authenticate
// once per asset. Tokens never change once made; they only go (`gateway
// token revoke`, often from another process) or expire. Expiry is checked
// on every hit. A revoked token keeps authenticating new requests for at
// most the TTL (never longer than Config.TokenRecheck), while what it
// already opened runs on until the next recheck anyway; the recheck drops
// the revoked tokens it finds from the cache at once.
const authCacheTTL = time.Second

// authCacheMax bounds the entries; a full cache starts over.
const authCacheMax = 4096

// authCache holds recently authenticated tokens by the SHA-256 of their
// secret (the secret itself is not kept). Only successful lookups are
// cached, so a token made a moment ago works at once.
type authCache struct {
	ttl time.Duration

	mu sync.Mutex
	m  map[[sha256.Size]byte]authEntry // guarded by mu
}

type authEntry struct {
	tok   store.Token
	until time.Time
}

func authKey(secret string) [sha256.Size]byte { return sha256.Sum256([]byte(secret)) }

// get returns the token cached for key if it is still fresh and not
// expired at now.
func (c *authCache) get(key [sha256.Size]byte, now time.Time) (store.Token, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		return store.Token{}, false
	}
	if !now.Before(e.until) || (!e.tok.ExpiresAt.IsZero() && !now.Before(e.tok.ExpiresAt)) {
		delete(c.m, key)
		return store.Token{}, false
	}
	return e.tok, true
}

// put caches tok, which the store just returned for key.
func (c *authCache) put(key [sha256.Size]byte, tok store.Token, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= authCacheMax {
		c.m = make(map[[sha256.Size]byte]authEntry)
	}
	c.m[key] = authEntry{tok: tok, until: now.Add(c.ttl)}
}

// retain drops every cached token whose id keep refuses (not among the
// store's tokens a recheck listed).
func (c *authCache) retain(keep func(id string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		if !keep(e.tok.ID) {
			delete(c.m, k)
		}
	}
}

// drop forgets the token with id at once (its session was logged out).
func (c *authCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		if e.tok.ID == id {
			delete(c.m, k)
		}
	}
}

// tokenSet is a snapshot of the store's tokens by id, taken again once
// older than ttl: what LiveToken answers from, so a preview cookie's
// token is checked on each request without a store read each time.
type tokenSet struct {
	ttl time.Duration

	mu      sync.Mutex
	taken   time.Time              // guarded by mu
	byID    map[string]store.Token // guarded by mu
	unknown map[string]bool        // ids of rows the store cannot read; guarded by mu
	// refreshing is closed when the snapshot under way ends; nil when
	// none is. One caller takes a snapshot, outside mu, while the others
	// answer from the last one: the read of every token (tens of ms with
	// a thousand tokens on a busy machine) stalled every preview-cookie
	// and share request in flight once a second.
	refreshing chan struct{} // guarded by mu
	// dropped holds what drop removed while a snapshot was under way:
	// that snapshot may have read the token before its revocation, and
	// must not bring it back.
	dropped map[string]bool // guarded by mu
	// missing holds the ids the store said, since the snapshot was
	// taken, it does not have: a miss in the snapshot is asked of the
	// store once (a token made after the snapshot's read began, a login's
	// session, is not in it), and not again until the next snapshot.
	missing map[string]bool // guarded by mu
	drops   uint64          // drop calls so far; guarded by mu
}

// drop removes the token with id from the snapshot, so LiveToken refuses
// it before the next one is taken.
func (ts *tokenSet) drop(id string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.byID, id)
	ts.drops++
	if ts.refreshing != nil {
		if ts.dropped == nil {
			ts.dropped = map[string]bool{}
		}
		ts.dropped[id] = true
	}
}

// ErrTokensUnknown is LiveToken's answer while the gateway has no
// snapshot of the store's tokens (none taken since the start, and the
// store cannot answer): whether a token lives is not known. It is not a
// revocation: callers must not end what the token made, and should
// refuse to serve (503) rather than answer as if the token were dead.
var ErrTokensUnknown = errors.New("gateway: the state store cannot list tokens yet")

// LiveToken returns the token with id if it still exists and has not
// expired: a revoked or expired token stops here within the auth cache's
// TTL (1 s, or --token-recheck if shorter) and the store read that one
// caller makes for the next snapshot while the rest answer from the last,
// as it does for bearer tokens.
// A store that cannot answer keeps the last snapshot (as a recheck cuts
// nothing on an outage); with none yet, LiveToken returns an error
// wrapping ErrTokensUnknown, never a plain "not live".
func (s *Server) LiveToken(ctx context.Context, id string) (store.Token, bool, error) {
	ts := &s.tokenSet
	for {
		now := time.Now()
		ts.mu.Lock()
		switch {
		case ts.byID != nil && (now.Sub(ts.taken) < ts.ttl || ts.refreshing != nil):
			// Fresh, or another caller is taking the next one.
			t, ok, err := ts.lookupLocked(id, now)
			if _, known := ts.byID[id]; ok || err != nil || known || ts.missing[id] {
				ts.mu.Unlock()
				return t, ok, err
			}
			return s.lookupMissLocked(ctx, id)
		case ts.refreshing != nil:
			// No snapshot yet: wait for the one under way.
			wait := ts.refreshing
			ts.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return store.Token{}, false, fmt.Errorf("%w: %w", ErrTokensUnknown, context.Cause(ctx))
			}
			continue
		}
		if err := s.snapshotLocked(ctx, now); err != nil {
			ts.mu.Unlock()
			return store.Token{}, false, err
		}
		t, ok, err := ts.lookupLocked(id, time.Now())
		ts.mu.Unlock()
		return t, ok, err
	}
}

// lookupMissLocked asks the store for a token id the snapshot does not
// hold: one made after the snapshot's read began (a fresh login's
// session, a token made and used at once) is not in it, and a share of
// it was ended as the token's revocation, a preview cookie sent back to
// log in. One row read per missing id per snapshot. ts.mu is held on
// entry and released on return.
func (s *Server) lookupMissLocked(ctx context.Context, id string) (store.Token, bool, error) {
	ts := &s.tokenSet
	drops := ts.drops
	ts.mu.Unlock()
	t, err := s.store.Token(ctx, id)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrExpired):
		if ts.missing == nil {
			ts.missing = map[string]bool{}
		}
		ts.missing[id] = true
		return store.Token{}, false, nil
	case err != nil:
		return store.Token{}, false, fmt.Errorf("%w: token %s: %w", ErrTokensUnknown, id, err)
	}
	// Kept for the snapshot's life, unless a revocation here came
	// between the read and now (it could be this token's).
	if ts.drops == drops && ts.byID != nil {
		ts.byID[id] = t
	}
	return t, true, nil
}

// lookupLocked is LiveToken's answer from the snapshot. ts.mu is held.
func (ts *tokenSet) lookupLocked(id string, now time.Time) (store.Token, bool, error) {
	if ts.unknown[id] {
		return store.Token{}, false, fmt.Errorf("%w: token %s: its row cannot be read", ErrTokensUnknown, id)
	}
	t, ok := ts.byID[id]
	if !ok || !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt) {
		return store.Token{}, false, nil
	}
	return t, true, nil
}

// snapshotLocked takes a new token snapshot; a failure keeps the last
// one. It errs only when there is none. ts.mu is held on entry and on
// return, and released while the store is read.
func (s *Server) snapshotLocked(ctx context.Context, now time.Time) error {
	ts := &s.tokenSet
	done := make(chan struct{})
	ts.refreshing = done
	ts.mu.Unlock()
	toks, err := s.store.Tokens(ctx)
	ts.mu.Lock()
	ts.refreshing = nil
	close(done)
	dropped := ts.dropped
	ts.dropped = nil
	var ue *store.UnreadableTokensError
	if err != nil && !errors.As(err, &ue) {
		s.logger.Warn("token snapshot", "err", err)
		if ts.byID == nil {
			return fmt.Errorf("%w: %w", ErrTokensUnknown, err)
		}
		return nil
	}
	ts.byID = make(map[string]store.Token, len(toks))
	ts.missing = nil
	for _, t := range toks {
		if !dropped[t.ID] {
			ts.byID[t.ID] = t
		}
	}
	// A row that cannot be read leaves that one token unknown (LiveToken
	// errs for it, so what it made is kept but not served), not the rest.
	ts.unknown = s.unreadable(ue)
	ts.taken = now
	return nil
}

// unreadable returns the set of token ids ue names (nil for none) and
// logs them when they differ from the last call's: the token snapshot and
// the session recheck both see them, every second or sweep, for as long
// as the rows stay broken.
func (s *Server) unreadable(ue *store.UnreadableTokensError) map[string]bool {
	var ids map[string]bool
	if ue != nil {
		ids = make(map[string]bool, len(ue.IDs))
		for _, id := range ue.IDs {
			ids[id] = true
		}
	}
	s.unreadableMu.Lock()
	defer s.unreadableMu.Unlock()
	if !maps.Equal(ids, s.unreadableIDs) {
		if ue != nil {
			s.logger.Error("token rows cannot be read; their tokens' sessions stay, their shares and preview cookies answer 503, until each is revoked", "ids", ue.IDs, "err", ue.Err, "fix", "gateway token revoke ID")
		} else if s.unreadableIDs != nil {
			s.logger.Info("token rows readable again")
		}
		s.unreadableIDs = ids
	}
	return ids
}
