package gateway

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/store"
)

// loginForm is the request of a login form post, whose token StartSession
// checks.
func loginForm() *http.Request {
	return httptest.NewRequest("POST", "/login", nil)
}

// cookieStatus is the status of GET path with the session cookie value.
func (e *env) cookieStatus(path, value string) int {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.ctx, "GET", e.ts.URL+path, nil)
	req.AddCookie(&http.Cookie{Name: SessionCookie, Value: value})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestLogoutEndsSession: a login gives the browser a session token of its
// own; a logout revokes it, so the cookie's value answers 401 from the
// next request on, its preview cookies stop, and the relayed session it
// opened is cut at once, with no recheck due for an hour. The token typed
// at login, and another session of it, go on.
func TestLogoutEndsSession(t *testing.T) {
	e := newEnv(t, &Config{TokenRecheck: time.Hour})
	_, k := newKey(t)
	if _, err := e.dialAgent(e.token(store.RoleAgent, "h"), k, hostgate.Info{}); err != nil {
		t.Fatal(err)
	}
	client := e.token(store.RoleClient, "h")
	cookie, sess, err := e.srv.StartSession(loginForm(), client, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := e.srv.StartSession(loginForm(), client, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if cookie == client || !sess.Allows("h") || sess.Allows("x") {
		t.Fatalf("session %+v: want a secret of its own, scoped as its token", sess)
	}
	if code := e.cookieStatus("/v1/hosts/h", cookie); code != 200 {
		t.Fatalf("the session cookie: %d, want 200", code)
	}
	c, err := e.relay("h", cookie)
	if err != nil {
		t.Fatal(err)
	}
	echoRoundTrip(t, c, 100)
	if _, ok, err := e.srv.LiveToken(e.ctx, sess.ID); !ok || err != nil {
		t.Fatal("the session's preview cookies are refused before the logout")
	}

	if err := e.srv.EndSession(e.ctx, cookie); err != nil {
		t.Fatal(err)
	}
	if code := e.cookieStatus("/v1/hosts/h", cookie); code != 401 {
		t.Fatalf("the cookie after logout: %d, want 401", code)
	}
	if code, _ := e.call("GET", "/v1/hosts/h", cookie, nil, nil); code != 401 {
		t.Fatalf("the cookie's value as a bearer token after logout: %d, want 401", code)
	}
	if _, ok, err := e.srv.LiveToken(e.ctx, sess.ID); ok || err != nil {
		t.Fatal("the session's preview cookies still work after the logout")
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !cutOff(err) {
		t.Fatal("the logged-out session's relay still reads")
	}
	for name, sec := range map[string]string{"the token": client, "another session": other} {
		if code := e.cookieStatus("/v1/hosts/h", sec); code != 200 {
			t.Errorf("%s after the logout: %d, want 200", name, code)
		}
	}

	// A cookie from before sessions held the token itself: logging out
	// with it must not revoke the token. Logging out twice is fine.
	for _, sec := range []string{client, cookie} {
		if err := e.srv.EndSession(e.ctx, sec); err != nil {
			t.Fatal(err)
		}
	}
	if code := e.cookieStatus("/v1/hosts/h", client); code != 200 {
		t.Fatalf("the token after a logout with it: %d, want 200", code)
	}
}

// TestLoginRefusals: what may not log in. A session's own secret (lifted
// from a browser's cookie, as a person never sees it) gets no session of
// its own, which would outlive the victim's logout.
func TestLoginRefusals(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	sess, _, err := e.srv.StartSession(loginForm(), admin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.srv.StartSession(loginForm(), sess, time.Hour); !errors.Is(err, store.ErrSessionParent) {
		t.Errorf("login with a session's secret: %v, want store.ErrSessionParent", err)
	}
	for name, sec := range map[string]string{"an agent token": e.token(store.RoleAgent, "h"), "a wrong token": "hg_wrong"} {
		if _, _, err := e.srv.StartSession(loginForm(), sec, time.Hour); !errors.Is(err, ErrLoginRefused) {
			t.Errorf("login with %s: %v, want ErrLoginRefused", name, err)
		}
	}
}

// TestRevokedTokenEndsItsSessions: `gateway token revoke` (straight in the
// store, from another process) of the token someone logged in with ends
// their browser sessions and what those opened, at the next recheck.
func TestRevokedTokenEndsItsSessions(t *testing.T) {
	e := newEnv(t, &Config{TokenRecheck: 20 * time.Millisecond})
	_, k := newKey(t)
	if _, err := e.dialAgent(e.token(store.RoleAgent, "h"), k, hostgate.Info{}); err != nil {
		t.Fatal(err)
	}
	admin := e.token(store.RoleAdmin)
	cookie, _, err := e.srv.StartSession(loginForm(), admin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.relay("h", cookie)
	if err != nil {
		t.Fatal(err)
	}
	echoRoundTrip(t, c, 100)
	e.revoke(admin)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !cutOff(err) {
		t.Fatal("a session of the revoked token still reads")
	}
	// The recheck that cut it cleared the auth cache first.
	if code := e.cookieStatus("/v1/hosts/h", cookie); code != 401 {
		t.Fatalf("a session cookie of the revoked token: %d, want 401", code)
	}
}

// TestLoginRefusalsSaySo: a login refused by the failure rate limit is
// ErrLoginLimited, not ErrLoginRefused, even with a good token: the login
// page called that token "not valid" after a few typos, and the person
// went looking for another. An expired token says it expired, and a
// wrong one stays refused.
func TestLoginRefusalsSaySo(t *testing.T) {
	e := newEnv(t, &Config{AuthFailureLimit: 3})
	good := e.token(store.RoleAdmin)
	old, _, err := e.store.CreateToken(e.ctx, store.TokenSpec{Role: store.RoleAdmin, ExpiresAt: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.srv.StartSession(loginForm(), old, time.Hour); !errors.Is(err, ErrLoginRefused) || !errors.Is(err, store.ErrExpired) {
		t.Fatalf("login with an expired token: %v, want ErrLoginRefused and store.ErrExpired", err)
	}
	for range 2 {
		if _, _, err := e.srv.StartSession(loginForm(), "hg_wrong", time.Hour); !errors.Is(err, ErrLoginRefused) || errors.Is(err, store.ErrExpired) || errors.Is(err, ErrLoginLimited) {
			t.Fatalf("login with a wrong token: %v, want ErrLoginRefused alone", err)
		}
	}
	_, _, err = e.srv.StartSession(loginForm(), good, time.Hour)
	if !errors.Is(err, ErrLoginLimited) || errors.Is(err, ErrLoginRefused) {
		t.Fatalf("login with a good token past the failure limit: %v, want ErrLoginLimited alone", err)
	}
}
