package gateway

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/store"
)

func TestAuthCacheEntries(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c := authCache{ttl: time.Second}
	a, b := authKey("secret-a"), authKey("secret-b")
	if _, ok := c.get(a, now); ok {
		t.Fatal("an empty cache answered")
	}
	c.put(a, store.Token{ID: "a"}, now)
	c.put(b, store.Token{ID: "b", ExpiresAt: now.Add(300 * time.Millisecond)}, now)
	if tok, ok := c.get(a, now.Add(999*time.Millisecond)); !ok || tok.ID != "a" {
		t.Fatalf("fresh entry: %+v %v", tok, ok)
	}
	if _, ok := c.get(a, now.Add(time.Second)); ok {
		t.Fatal("an entry older than the TTL answered")
	}
	if _, ok := c.get(a, now); ok {
		t.Fatal("a stale entry was kept")
	}
	if _, ok := c.get(b, now.Add(299*time.Millisecond)); !ok {
		t.Fatal("a token before its expiry missed")
	}
	if _, ok := c.get(b, now.Add(300*time.Millisecond)); ok {
		t.Fatal("a token past its expiry answered from the cache")
	}
	if _, ok := c.get(authKey("secret-c"), now); ok {
		t.Fatal("an unknown secret answered")
	}

	c.put(a, store.Token{ID: "a"}, now)
	c.put(b, store.Token{ID: "b"}, now)
	c.retain(func(id string) bool { return id == "b" })
	if _, ok := c.get(a, now); ok {
		t.Fatal("retain kept a token the store no longer has")
	}
	if _, ok := c.get(b, now); !ok {
		t.Fatal("retain dropped a valid token")
	}
}

func TestAuthCacheBounded(t *testing.T) {
	now := time.Now()
	c := authCache{ttl: time.Minute}
	for i := range authCacheMax + 10 {
		c.put(authKey(string(rune(i))+"x"), store.Token{ID: "t"}, now)
		if n := len(c.m); n > authCacheMax {
			t.Fatalf("%d entries, bound %d", n, authCacheMax)
		}
	}
}

// countingStore counts token lookups.
type countingStore struct {
	store.Store
	lookups atomic.Int64
}

func (s *countingStore) LookupToken(ctx context.Context, secret string) (store.Token, error) {
	s.lookups.Add(1)
	return s.Store.LookupToken(ctx, secret)
}

// TestAuthCacheSparesStore: a burst of requests with one token asks the
// store about once, while bad secrets are asked about every time (a
// failure is never cached) and still fail.
func TestAuthCacheSparesStore(t *testing.T) {
	var cs *countingStore
	e := newEnvWrapped(t, nil, func(st store.Store) store.Store {
		cs = &countingStore{Store: st}
		return cs
	})
	admin := e.token(store.RoleAdmin)
	const n = 50
	for range n {
		if code, _ := e.call("GET", "/v1/hosts", admin, nil, nil); code != 200 {
			t.Fatalf("GET /v1/hosts: %d", code)
		}
	}
	// One lookup per TTL at most; a slow machine may cross a few TTLs.
	if got := cs.lookups.Load(); got < 1 || got > 5 {
		t.Fatalf("%d requests made %d store lookups, want 1 to 5", n, got)
	}
	before := cs.lookups.Load()
	for range 3 {
		if code, _ := e.call("GET", "/v1/hosts", "hg_not-a-token", nil, nil); code != 401 {
			t.Fatalf("bad token: %d, want 401", code)
		}
	}
	if got := cs.lookups.Load() - before; got != 3 {
		t.Fatalf("3 bad tokens made %d store lookups, want 3", got)
	}
}

// TestAuthCacheRevokedAndExpired: a token revoked in the store (as `gateway
// token revoke` does, from another process) stops working within the
// cache's TTL although no session of its is live to trigger a recheck; a
// token past its expiry fails at once although it is cached.
func TestAuthCacheRevokedAndExpired(t *testing.T) {
	e := newEnv(t, nil) // TokenRecheck 30 s: the TTL alone must end it
	sec := e.token(store.RoleAdmin)
	if code, _ := e.call("GET", "/v1/hosts", sec, nil, nil); code != 200 {
		t.Fatalf("GET /v1/hosts: %d", code)
	}
	e.revoke(sec)
	// The TTL is 1 s; the margin is for a slow machine's requests.
	deadline := time.Now().Add(3 * authCacheTTL)
	for {
		code, _ := e.call("GET", "/v1/hosts", sec, nil, nil)
		if code == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("revoked token still answers %d after %v", code, 3*authCacheTTL)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Expiry while the token is cached: the cache's TTL made far longer
	// than the token's life, and the life (2 s) far longer than a loaded
	// machine stalls before the first request lands. At 900 ms against
	// the 1 s TTL a stall could fail the first request, or leave the
	// cache out of the second.
	e.srv.auth.mu.Lock()
	e.srv.auth.ttl = time.Hour
	e.srv.auth.mu.Unlock()
	exp := time.Now().Add(2 * time.Second)
	sec, _, err := e.store.CreateToken(e.ctx, store.TokenSpec{Role: store.RoleAdmin, ExpiresAt: exp})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := e.call("GET", "/v1/hosts", sec, nil, nil); code != 200 {
		t.Fatalf("fresh expiring token: %d", code)
	}
	time.Sleep(time.Until(exp) + 10*time.Millisecond)
	if code, _ := e.call("GET", "/v1/hosts", sec, nil, nil); code != 401 {
		t.Fatalf("expired token: %d, want 401", code)
	}
}

// TestAuthCacheTTLFollowsRecheck: a --token-recheck shorter than the
// cache's TTL shortens the TTL too, as the README promises.
func TestAuthCacheTTLFollowsRecheck(t *testing.T) {
	if got := newEnv(t, &Config{TokenRecheck: 200 * time.Millisecond}).srv.auth.ttl; got != 200*time.Millisecond {
		t.Errorf("TokenRecheck 200ms: cache TTL %v", got)
	}
	if got := newEnv(t, nil).srv.auth.ttl; got != authCacheTTL {
		t.Errorf("default TokenRecheck: cache TTL %v, want %v", got, authCacheTTL)
	}
}

// TestRecheckPurgesAuthCache: a recheck that finds a token revoked drops it
// from the cache at once, so it opens nothing new from then on, not merely
// after the cache's TTL.
func TestRecheckPurgesAuthCache(t *testing.T) {
	e := newEnv(t, &Config{TokenRecheck: time.Hour}) // rechecked by hand; cache TTL 1 s
	_, k := newKey(t)
	if _, err := e.dialAgent(e.token(store.RoleAgent, "h"), k, hostgate.Info{}); err != nil {
		t.Fatal(err)
	}
	sec := e.token(store.RoleClient, "h")
	// A live session, so that the recheck has something to check.
	conn, err := e.relay("h", sec)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if code, _ := e.call("GET", "/v1/hosts/h", sec, nil, nil); code != 200 {
		t.Fatalf("GET /v1/hosts/h: %d", code)
	}
	e.revoke(sec)
	if err := e.srv.live.recheck(e.ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if code, _ := e.call("GET", "/v1/hosts/h", sec, nil, nil); code != 401 {
		t.Fatalf("revoked token after a recheck: %d, want 401", code)
	}
}
