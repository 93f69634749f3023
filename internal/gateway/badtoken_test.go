package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
)

// TestBadTokenSaysTheFix: a token the gateway does not take (mistyped,
// revoked, from another state dir, expired) is refused with the words
// callers quote (`invalid token`, `token expired`) and how to get one it
// takes. It said only "invalid token", which `gateway proxy`, `gateway
// cert`, agents and Go programs pass on as it is, and which names no fix
// (found by the audit42a README audit: a revoked client token behind
// nginx).
func TestBadTokenSaysTheFix(t *testing.T) {
	e := newEnv(t, nil)
	revoked := e.token(store.RoleClient, "a")
	e.revoke(revoked)
	expired, _, err := e.store.CreateToken(e.ctx, store.TokenSpec{Role: store.RoleClient, Hosts: []string{"a"}, ExpiresAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, token, prefix string }{
		{"mistyped", "hg_wrong", "invalid token: "},
		{"revoked", revoked, "invalid token: "},
		{"expired", expired, "token expired: "},
	} {
		req, _ := http.NewRequestWithContext(e.ctx, "GET", e.ts.URL+"/v1/hosts/a", nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		we, _ := wire.ParseError(b)
		if res.StatusCode != http.StatusUnauthorized || we.Code != "unauthorized" {
			t.Fatalf("%s token: %d %s, want 401 unauthorized", c.name, res.StatusCode, b)
		}
		if !strings.HasPrefix(we.Message, c.prefix) || !strings.Contains(we.Message, "gateway token create") {
			t.Errorf("%s token: message %q, want it to begin %q and say how to get a token (gateway token create)", c.name, we.Message, c.prefix)
		}
	}
}
