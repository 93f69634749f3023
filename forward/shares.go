package forward

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Share makes one port of one host public until Expires.
type Share struct {
	HostID  string
	Port    int
	Expires time.Time
	// By names who shared it (a token name), for audit.
	By string
	// TokenID is the id of the token that shared it, when a gateway
	// made it: the gateway ends the share with the token.
	TokenID string
	// Session is the id of the browser login session that shared it,
	// when one did (TokenID is then the token logged in with): the
	// gateway ends the share with the session too.
	Session string
	Created time.Time
}

// Shares is what the preview proxy asks of a share store: the live share of
// a port, if any. Lookup must not return an expired share.
type Shares interface {
	Lookup(ctx context.Context, hostID string, port int) (Share, bool, error)
}

// ShareStore is a share store the gateway manages. Who may share (an admin,
// or a client token scoped to the host) is the gateway's check, made before
// Put.
type ShareStore interface {
	Shares
	// Put adds or replaces the share of s.HostID:s.Port.
	Put(ctx context.Context, s Share) error
	// Delete removes a share; deleting a missing share is not an error.
	Delete(ctx context.Context, hostID string, port int) error
	// List returns the live shares, ordered by host and port.
	List(ctx context.Context) ([]Share, error)
}

// ErrTooManyShares is returned by MemoryShares.Put when it is full.
var ErrTooManyShares = errors.New("forward: too many shares")

// MemoryShares is an in-memory ShareStore with an injected clock. Expired
// shares stop working at once and are pruned on List, and on a Put that
// finds the store full.
type MemoryShares struct {
	now func() time.Time
	max int

	mu sync.Mutex
	m  map[shareKey]Share
}

type shareKey struct {
	host string
	port int
}

var _ ShareStore = (*MemoryShares)(nil)

// NewMemoryShares returns an empty store; now nil means time.Now. It holds
// at most 10 000 live shares.
func NewMemoryShares(now func() time.Time) *MemoryShares {
	if now == nil {
		now = time.Now
	}
	return &MemoryShares{now: now, max: 10000, m: make(map[shareKey]Share)}
}

// Put adds or replaces a share. The expiry must be in the future.
func (s *MemoryShares) Put(_ context.Context, sh Share) error {
	if err := validHostID(sh.HostID); err != nil {
		return err
	}
	if sh.Port < 1 || sh.Port > 65535 {
		return fmt.Errorf("forward: share port %d out of range", sh.Port)
	}
	now := s.now()
	if !sh.Expires.After(now) {
		return fmt.Errorf("forward: share expiry %s is not in the future", sh.Expires.Format(time.RFC3339))
	}
	if sh.Created.IsZero() {
		sh.Created = now
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := shareKey{sh.HostID, sh.Port}
	if _, ok := s.m[k]; !ok && len(s.m) >= s.max {
		// Pruned only when full: a prune per Put made loading the
		// gateway's stored shares at start quadratic (0.7 s for 10 000).
		s.pruneLocked(now)
		if len(s.m) >= s.max {
			return ErrTooManyShares
		}
	}
	s.m[k] = sh
	return nil
}

// Delete removes a share.
func (s *MemoryShares) Delete(_ context.Context, hostID string, port int) error {
	s.mu.Lock()
	delete(s.m, shareKey{hostID, port})
	s.mu.Unlock()
	return nil
}

// Lookup returns the share of hostID:port if it has not expired.
func (s *MemoryShares) Lookup(_ context.Context, hostID string, port int) (Share, bool, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	k := shareKey{hostID, port}
	sh, ok := s.m[k]
	if ok && !now.Before(sh.Expires) {
		delete(s.m, k)
		return Share{}, false, nil
	}
	return sh, ok, nil
}

// List returns the live shares.
func (s *MemoryShares) List(context.Context) ([]Share, error) {
	s.mu.Lock()
	s.pruneLocked(s.now())
	out := make([]Share, 0, len(s.m))
	for _, sh := range s.m {
		out = append(out, sh)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].HostID != out[j].HostID {
			return out[i].HostID < out[j].HostID
		}
		return out[i].Port < out[j].Port
	})
	return out, nil
}

// Count returns how many live shares match.
func (s *MemoryShares) Count(match func(Share) bool) int {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sh := range s.m {
		if now.Before(sh.Expires) && match(sh) {
			n++
		}
	}
	return n
}

func (s *MemoryShares) pruneLocked(now time.Time) {
	for k, sh := range s.m {
		if !now.Before(sh.Expires) {
			delete(s.m, k)
		}
	}
}
