package gateway

import (
	"errors"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/store"
)

// TestEnrollWithRevokedToken: an agent token revoked while its agent's
// connection was under way (`gateway host remove` revokes it, then
// deletes the host) enrolls nothing. The gateway trusts a token that
// authenticated a moment ago (the auth cache) and pinned the host after
// its removal: the host came back, for good, with the key of an agent
// whose token was gone.
func TestEnrollWithRevokedToken(t *testing.T) {
	e := newEnv(t, nil)
	// The revocation lands between the agent's authentication and its
	// enrollment: here, the cache keeps the token's authentication for
	// the whole test, as it does for a second.
	e.srv.auth.ttl = time.Hour
	secret := e.token(store.RoleAgent, "h1")
	if code, c := e.call("GET", "/v1/me", secret, nil, nil); code != 200 {
		t.Fatalf("/v1/me with the agent token: %d %s", code, c)
	}
	e.revoke(secret)
	_, key := newKey(t)
	a, err := e.dialAgent(secret, key, hostgate.Info{Kind: "machine"})
	if err == nil {
		a.close()
	}
	if h, err := e.store.Host(e.ctx, "h1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("host h1 after its agent connected with a revoked token: %+v, %v; want none", h.ID, err)
	}

	// A host already pinned: its agent's tunnel does not come up.
	_, key2 := newKey(t)
	e.pin("h2", key2)
	secret2 := e.token(store.RoleAgent, "h2")
	if code, c := e.call("GET", "/v1/me", secret2, nil, nil); code != 200 {
		t.Fatalf("/v1/me with the agent token: %d %s", code, c)
	}
	e.revoke(secret2)
	if a, err := e.dialAgent(secret2, key2, hostgate.Info{Kind: "machine"}); err == nil {
		a.close()
		t.Error("a pinned host's agent with a revoked token: its tunnel came up")
	}
	// Forgotten at once: the next request with it is refused too.
	if code, _ := e.call("GET", "/v1/me", secret2, nil, nil); code != 401 {
		t.Errorf("/v1/me with the revoked token after its refused enrollment: %d, want 401", code)
	}
}
