package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hostgate/hostgate/internal/store"
)

// DefaultTokenRecheck is how often live sessions' tokens are looked up
// again when Config.TokenRecheck is zero.
const DefaultTokenRecheck = 30 * time.Second

// ErrTokenRevoked ends a relayed session or agent tunnel whose token was
// revoked or expired after it opened.
var ErrTokenRevoked = errors.New("gateway: the session's token was revoked or expired")

// liveSet is every relayed session and agent tunnel by the token that
// opened it. A token check at the door is not enough: `gateway token
// revoke` (often another process, on the same store) must also end what
// the token already opened, and a token that expires mid-session stops
// authorizing it. A sweeper started with the first session looks every
// token up again each interval and cancels what lost its token.
type liveSet struct {
	s *Server

	mu      sync.Mutex
	next    uint64
	m       map[uint64]liveEntry // guarded by mu
	started bool
}

type liveEntry struct {
	tok    store.Token
	what   string // "ssh", "ssh-direct", "pty" or "tunnel"
	host   string
	cancel context.CancelCauseFunc
	// onCut, when set, is told why the session's token went ("revoked",
	// "expired", "revoked by a logout") before cancel: a direct session
	// says so to its agent. It runs under the set's lock: it must not
	// block.
	onCut func(reason string)
}

// Live registers a session the gateway's hooks run for a caller (a web
// terminal): the returned context ends with ErrTokenRevoked as its cause
// once tok is revoked or expires, and done must be called when the
// session ends.
//
// The context also names tok to HostClients.Dial, whose certificate for
// the session carries its id (sshca.CA.SignToken), as every certificate
// the gateway issues to a token does.
func (s *Server) Live(ctx context.Context, tok store.Token, kind, hostID string) (context.Context, func()) {
	return s.live.add(context.WithValue(ctx, tokenIDKey{}, tok.ID), tok, kind, hostID)
}

// tokenIDKey is the context key of the id of the token a session runs
// for (Live).
type tokenIDKey struct{}

// tokenIDOf is the id of the token ctx's session runs for (Live), or "".
func tokenIDOf(ctx context.Context) string {
	id, _ := ctx.Value(tokenIDKey{}).(string)
	return id
}

// add registers a session opened with tok; ctx ends with ErrTokenRevoked
// when the token goes. remove must be called when the session ends.
func (l *liveSet) add(parent context.Context, tok store.Token, what, host string) (ctx context.Context, remove func()) {
	return l.addCut(parent, tok, what, host, nil)
}

// addCut is add whose onCut (when set) is told why the token went before
// ctx ends (liveEntry.onCut).
func (l *liveSet) addCut(parent context.Context, tok store.Token, what, host string, onCut func(reason string)) (ctx context.Context, remove func()) {
	ctx, cancel := context.WithCancelCause(parent)
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[uint64]liveEntry)
	}
	id := l.next
	l.next++
	l.m[id] = liveEntry{tok: tok, what: what, host: host, cancel: cancel, onCut: onCut}
	start := !l.started
	l.started = true
	l.mu.Unlock()
	if start && l.s.track() { // not while closing: Close waits for the sweeper
		go l.sweep()
	}
	return ctx, func() {
		l.mu.Lock()
		delete(l.m, id)
		l.mu.Unlock()
		cancel(nil)
	}
}

// sweep rechecks tokens every interval until the server closes.
func (l *liveSet) sweep() {
	defer l.s.wg.Done()
	t := time.NewTicker(l.s.cfg.TokenRecheck)
	defer t.Stop()
	for {
		select {
		case <-l.s.ctx.Done():
			return
		case <-t.C:
		}
		if err := l.recheck(l.s.ctx, time.Now()); err != nil && l.s.ctx.Err() == nil {
			l.s.logger.Warn("token recheck", "err", err)
		}
	}
}

// recheck cancels every session whose token is gone or expired at now.
func (l *liveSet) recheck(ctx context.Context, now time.Time) error {
	// Only sessions registered before the store is read are judged by
	// what it read: one opened meanwhile, with a token (a login's
	// session) created after the read began, is not in the list without
	// being revoked. Ids grow, so before is every id below next.
	l.mu.Lock()
	empty, before := len(l.m) == 0, l.next
	l.mu.Unlock()
	if empty {
		return nil
	}
	toks, err := l.s.store.Tokens(ctx)
	var ue *store.UnreadableTokensError
	if err != nil && !errors.As(err, &ue) {
		// A store that cannot answer revokes nothing: sessions are not cut
		// for an outage, and the next sweep tries again.
		return fmt.Errorf("list tokens: %w", err)
	}
	valid := make(map[string]store.Token, len(toks))
	for _, t := range toks {
		valid[t.ID] = t
	}
	// A row that cannot be read is not a revocation: its sessions and
	// cache entries stay, as on an outage; every other token is checked.
	unknown := l.s.unreadable(ue)
	l.s.auth.retain(func(id string) bool { _, ok := valid[id]; return ok || unknown[id] })
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, e := range l.m {
		t, ok := valid[e.tok.ID]
		switch {
		case id >= before, unknown[e.tok.ID]:
		case !ok:
			l.cut(id, e, "revoked")
		case !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt):
			l.cut(id, e, "expired")
		}
	}
	return nil
}

// end cuts every session opened with the token with id now, for reason
// (the token was just revoked here: no need to wait for a recheck).
func (l *liveSet) end(tokenID, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, e := range l.m {
		if e.tok.ID == tokenID {
			l.cut(id, e, reason)
		}
	}
}

// cut ends session id. Called with mu held.
func (l *liveSet) cut(id uint64, e liveEntry, reason string) {
	l.s.logger.Info("session ended: its token was "+reason, "kind", e.what, "host", e.host, "token", e.tok.Name)
	if e.onCut != nil {
		e.onCut(reason)
	}
	e.cancel(ErrTokenRevoked)
	delete(l.m, id)
}

// count is how many sessions are live (for tests).
func (l *liveSet) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}

// tokenGone forgets tok, which the store says was revoked or has expired
// since it authenticated: the auth cache and the token snapshot would
// otherwise let it in again until their next look at the store.
func (s *Server) tokenGone(tok store.Token) {
	s.auth.drop(tok.ID)
	s.tokenSet.drop(tok.ID)
}
