package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/forward"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/store"
)

// TestSharesFollowTheirToken: a share outlives a gateway restart until its
// expiry, is listed, and ends with the token that made it, or with the
// browser session that made it (a logout, a revocation). Shares lived in
// memory only, so a restart lost them, and a revoked token's shares stayed
// public for up to their 7 days. Host h1 is enrolled but never connects: a
// request the share lets in is answered 503 (host unavailable) by the
// preview, one it does not let in 401.
func TestSharesFollowTheirToken(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base, stop := startStoppable(t, dir)
	enrollHost(t, ctx, dir, "h1")
	out, err := cli(t, ctx, "token", "create", "--role", "client", "--host", "h1", "--name", "sharer", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	client := lastLine(out)
	m := regexp.MustCompile(`\(id (\w+)\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no token id in %q", out)
	}
	clientID := m[1]

	do := func(base, method, path, token, body string) (int, string) {
		t.Helper()
		return apiDo(t, ctx, base, method, path, token, body)
	}

	for _, bad := range []string{
		`{"port":3000,"ttlSeconds":18446747674}`, // wrapped to an hour as a Duration
		`{"port":3000,"ttlSeconds":604801}`,
		`{"port":3000,"ttlSeconds":60} {}`,
		`{"port":3000,"ttlSeconds":60,"public":true}`,
		`{"port":"3000","ttlSeconds":60}`,
	} {
		if code, body := do(base, "POST", "/v1/hosts/h1/shares", client, bad); code != http.StatusBadRequest || !strings.Contains(body, `"bad_request"`) {
			t.Errorf("share %s: %d %s, want 400 bad_request", bad, code, body)
		}
	}
	// An unknown field is named with the fields the body takes.
	if _, body := do(base, "POST", "/v1/hosts/h1/shares", client, `{"port":3000,"ttl":60}`); !strings.Contains(body, `"ttl: unknown field; the body takes port, ttlSeconds"`) {
		t.Errorf("share with ttl for ttlSeconds: %s, want the field and those the body takes", body)
	}
	if code, body := do(base, "POST", "/v1/hosts/h1/shares", client, `{"port":3000,"ttlSeconds":600}`); code != http.StatusCreated {
		t.Fatalf("share: %d %s", code, body)
	}
	if code, body := do(base, "GET", "/preview/h1/3000/", "", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("shared port, anonymous: %d %s, want the preview's 503 for a host not connected", code, body)
	}
	if code, _ := do(base, "GET", "/preview/h1/3001/", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("a port not shared, anonymous: %d, want 401", code)
	}

	// A share made from a browser login ends with that session (a stolen
	// session cookie must not publish ports that outlive the victim's
	// logout), and says which session made it; it outlives a restart
	// while the session lives.
	st, err := store.Open(ctx, filepath.Join(dir, dbFile))
	if err != nil {
		t.Fatal(err)
	}
	var sessions [2]string
	var sessionIDs [2]string
	for i, port := range []string{"4000", "4001"} {
		sec, stok, err := st.CreateSession(ctx, clientID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		sessions[i], sessionIDs[i] = sec, stok.ID
		if code, body := do(base, "POST", "/v1/hosts/h1/shares", sec, `{"port":`+port+`,"ttlSeconds":600}`); code != http.StatusCreated || !strings.Contains(body, `"session":"`+stok.ID+`"`) {
			t.Fatalf("share from a session: %d %s, want 201 naming session %s", code, body, stok.ID)
		}
	}
	_ = st.Close()

	stop()
	base = startServe(t, dir)
	code, body := do(base, "GET", "/v1/hosts/h1/shares", client, "")
	var list struct {
		Shares []struct {
			HostID    string    `json:"hostId"`
			Port      int       `json:"port"`
			By        string    `json:"by"`
			Session   string    `json:"session"`
			ExpiresAt time.Time `json:"expiresAt"`
		} `json:"shares"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil || code != http.StatusOK {
		t.Fatalf("list after a restart: %d %s", code, body)
	}
	if len(list.Shares) != 3 || list.Shares[0].Port != 3000 || list.Shares[0].By != "sharer" || list.Shares[0].Session != "" ||
		time.Until(list.Shares[0].ExpiresAt) < 8*time.Minute ||
		list.Shares[1].Port != 4000 || list.Shares[1].Session != sessionIDs[0] || list.Shares[2].Port != 4001 || list.Shares[2].Session != sessionIDs[1] {
		t.Fatalf("shares after a restart: %+v, want 3000 by the token, 4000 and 4001 by sessions %v", list.Shares, sessionIDs)
	}
	for _, port := range []string{"3000", "4000", "4001"} {
		if code, body := do(base, "GET", "/preview/h1/"+port+"/", "", ""); code != http.StatusServiceUnavailable {
			t.Fatalf("shared port %s after a restart, anonymous: %d %s", port, code, body)
		}
	}

	// The web UI's logout ends the first session's share at once.
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/logout", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: gateway.SessionCookie, Value: sessions[0]})
	res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", res.StatusCode)
	}
	if code, _ := do(base, "GET", "/preview/h1/4000/", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("the share of a logged-out session, anonymous: %d, want 401", code)
	}
	// Revoking the other session (another process) ends its share within
	// the token snapshot's second; the token's own share stays.
	if _, err := cli(t, ctx, "token", "revoke", sessionIDs[1], "--state-dir", dir); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if code, _ := do(base, "GET", "/preview/h1/4001/", "", ""); code == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the share outlived its revoked session by 10 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code, body := do(base, "GET", "/preview/h1/3000/", "", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("the token's share after its sessions ended: %d %s, want it still public", code, body)
	}
	if code, body := do(base, "GET", "/v1/hosts/h1/shares", client, ""); code != http.StatusOK || strings.Contains(body, `"port":400`) {
		t.Fatalf("shares of ended sessions still listed: %d %s", code, body)
	}

	if _, err := cli(t, ctx, "token", "revoke", clientID, "--state-dir", dir); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		code, _ := do(base, "GET", "/preview/h1/3000/", "", "")
		if code == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the share outlived its token by 10 s: %d", code)
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, err = cli(t, ctx, "token", "create", "--role", "admin", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := do(base, "GET", "/v1/hosts/h1/shares", lastLine(out), ""); code != http.StatusOK || !strings.Contains(body, `"shares":[]`) {
		t.Fatalf("shares of a revoked token still listed: %d %s", code, body)
	}
	// A host never enrolled (a mistyped id) has no shares to list: an
	// empty list would read as "none yet".
	if code, body := do(base, "GET", "/v1/hosts/h9/shares", lastLine(out), ""); code != http.StatusNotFound || !strings.Contains(body, `"not_found"`) {
		t.Fatalf("shares of a host never enrolled: %d %s, want 404 not_found", code, body)
	}
}

// shareRows is a store.Store holding only shares, which it counts
// deletes of; the rest of the interface is never called.
type shareRows struct {
	store.Store
	mu      sync.Mutex
	rows    map[string]store.Share
	deletes int
}

func (s *shareRows) PutShare(_ context.Context, sh store.Share) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows[fmt.Sprint(sh.HostID, ":", sh.Port)] = sh
	return nil
}

func (s *shareRows) DeleteShare(_ context.Context, hostID string, port int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deletes++
	delete(s.rows, fmt.Sprint(hostID, ":", port))
	return nil
}

func (s *shareRows) Shares(context.Context) ([]store.Share, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Share
	for _, sh := range s.rows {
		out = append(out, sh)
	}
	return out, nil
}

// enrollHost enrolls id in dir's store, as its agent's first connection
// does: shares are of enrolled hosts.
func enrollHost(t *testing.T, ctx context.Context, dir, id string) {
	t.Helper()
	st, _, err := openState(ctx, dir, func(store.TightenedFile) {})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Enroll(ctx, store.Enrollment{HostID: id, Kind: "machine", HostKey: authorizedHostKey(t)}); err != nil {
		t.Fatal(err)
	}
}

// Host answers that every host has been enrolled since before any share.
func (s *shareRows) Host(_ context.Context, id string) (store.Host, error) {
	return store.Host{ID: id}, nil
}

func (s *shareRows) count() (rows, deletes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rows), s.deletes
}

// tokenStates answers gatewayShares' liveness question: ids in dead are
// revoked, and unknown makes every answer "not known".
type tokenStates struct {
	mu      sync.Mutex
	dead    map[string]bool
	unknown bool
}

func (ts *tokenStates) live(_ context.Context, id string) (bool, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.unknown {
		return false, gateway.ErrTokensUnknown
	}
	return !ts.dead[id], nil
}

func (ts *tokenStates) set(f func(ts *tokenStates)) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	f(ts)
}

// The shares of a revoked token no longer count against the cap of
// 10,000: they held their place until something looked each up, so a
// user who had revoked the token that made them got "too many shares"
// with none alive. The listing never shows them.
func TestSharesOfDeadTokensLeaveTheCap(t *testing.T) {
	ctx := testCtx(t)
	rows := &shareRows{rows: map[string]store.Share{}}
	ts := &tokenStates{dead: map[string]bool{}}
	g, err := newGatewayShares(ctx, rows, ts.live)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	put := func(tokenID string, port int) error {
		return g.Put(ctx, forward.Share{HostID: "h", Port: port, TokenID: tokenID, Created: now, Expires: now.Add(time.Hour)})
	}
	const limit = 10000
	// Straight into memory and store: Put's count of the token's shares
	// would make this quadratic.
	for port := 1; port <= limit; port++ {
		sh := forward.Share{HostID: "h", Port: port, TokenID: fmt.Sprint("old", port%20), Created: now, Expires: now.Add(time.Hour)}
		if err := g.mem.Put(ctx, sh); err != nil {
			t.Fatalf("share %d: %v", port, err)
		}
		_ = rows.PutShare(ctx, store.Share{HostID: sh.HostID, Port: sh.Port, TokenID: sh.TokenID, Created: now, Expires: sh.Expires})
	}
	if err := put("new", limit+1); !errors.Is(err, forward.ErrTooManyShares) {
		t.Fatalf("share past the cap, all alive: %v, want ErrTooManyShares", err)
	}
	// Not knowing whether the old tokens live ends nothing, and says so.
	ts.set(func(ts *tokenStates) { ts.unknown = true })
	if err := put("new", limit+1); !errors.Is(err, gateway.ErrTokensUnknown) {
		t.Fatalf("share past the cap, token states unknown: %v, want ErrTokensUnknown", err)
	}
	if n, _ := rows.count(); n != limit {
		t.Fatalf("%d stored shares after an unknown answer, want %d", n, limit)
	}
	ts.set(func(ts *tokenStates) {
		ts.unknown = false
		for i := range 20 {
			ts.dead[fmt.Sprint("old", i)] = true
		}
	})
	if err := put("new", limit+1); err != nil {
		t.Fatalf("share with every other share's token revoked: %v", err)
	}
	if n, _ := rows.count(); n != 1 {
		t.Errorf("%d stored shares, want the revoked token's gone", n)
	}
	list, err := g.List(ctx)
	if err != nil || len(list) != 1 || list[0].TokenID != "new" {
		t.Fatalf("List = %d shares, %v; want the one alive", len(list), err)
	}
}

// While the gateway cannot tell whether a share's token lives (no token
// snapshot yet: the store failed at startup), the share is neither
// served nor ended: Lookup and List fail, and the stored share stays.
// LiveToken answered false then, and every persisted share was deleted
// as if its token had been revoked.
func TestSharesSurviveUnknownTokens(t *testing.T) {
	ctx := testCtx(t)
	now := time.Now()
	rows := &shareRows{rows: map[string]store.Share{
		"h:3000": {HostID: "h", Port: 3000, TokenID: "t", Created: now, Expires: now.Add(time.Hour)},
	}}
	ts := &tokenStates{dead: map[string]bool{}, unknown: true}
	g, err := newGatewayShares(ctx, rows, ts.live)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := g.Lookup(ctx, "h", 3000); ok || !errors.Is(err, gateway.ErrTokensUnknown) {
		t.Fatalf("Lookup with the token's state unknown: %v, %v; want ErrTokensUnknown", ok, err)
	}
	if _, err := g.List(ctx); !errors.Is(err, gateway.ErrTokensUnknown) {
		t.Fatalf("List with the token's state unknown: %v, want ErrTokensUnknown", err)
	}
	if n, deletes := rows.count(); n != 1 || deletes != 0 {
		t.Fatalf("%d stored shares, %d deletes after unknown answers; want the share kept", n, deletes)
	}
	ts.set(func(ts *tokenStates) { ts.unknown = false })
	if _, ok, err := g.Lookup(ctx, "h", 3000); !ok || err != nil {
		t.Fatalf("Lookup once known: %v, %v", ok, err)
	}
	ts.set(func(ts *tokenStates) { ts.dead["t"] = true })
	if _, ok, err := g.Lookup(ctx, "h", 3000); ok || err != nil {
		t.Fatalf("Lookup once revoked: %v, %v", ok, err)
	}
	if n, _ := rows.count(); n != 0 {
		t.Fatalf("%d stored shares after the revocation was seen, want 0", n)
	}
}

// One token holds at most maxSharesPerToken live shares: a client of one
// host could fill the gateway's cap of 10,000 by itself (its host has
// 65,535 ports) and leave every other user "too many shares". Replacing a
// share it holds still works, and other tokens still share.
func TestSharesPerTokenCap(t *testing.T) {
	ctx := testCtx(t)
	rows := &shareRows{rows: map[string]store.Share{}}
	ts := &tokenStates{dead: map[string]bool{}}
	g, err := newGatewayShares(ctx, rows, ts.live)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	put := func(tokenID string, port int) error {
		return g.Put(ctx, forward.Share{HostID: "h", Port: port, TokenID: tokenID, Created: now, Expires: now.Add(time.Hour)})
	}
	for port := 1; port <= maxSharesPerToken; port++ {
		if err := put("greedy", port); err != nil {
			t.Fatalf("share %d: %v", port, err)
		}
	}
	if err := put("greedy", maxSharesPerToken+1); !errors.Is(err, forward.ErrTooManyShares) {
		t.Fatalf("share %d of one token: %v, want ErrTooManyShares", maxSharesPerToken+1, err)
	}
	if err := put("greedy", 1); err != nil {
		t.Fatalf("replacing a share the token holds: %v", err)
	}
	if err := put("other", maxSharesPerToken+1); err != nil {
		t.Fatalf("another token's share: %v", err)
	}
}

// A gateway that cannot list its tokens from the start (here a token row
// it cannot read) keeps the shares it stored and answers a shared port
// 503 store_unavailable until it can; it answered as if every share's
// token were revoked, 401, and deleted the shares for good.
func TestSharesWaitForTokenList(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base, stop := startStoppable(t, dir)
	enrollHost(t, ctx, dir, "h1")
	out, err := cli(t, ctx, "token", "create", "--role", "client", "--host", "h1", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	client := lastLine(out)
	do := func(method, path, token, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Accept", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := do("POST", "/v1/hosts/h1/shares", client, `{"port":3000,"ttlSeconds":600}`); code != http.StatusCreated {
		t.Fatalf("share: %d %s", code, body)
	}
	stop()

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, dbFile)+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The share's own token row: the other rows list (an unreadable row
	// no longer hides them), so this token alone is unknown.
	if _, err := db.ExecContext(ctx, `UPDATE tokens SET hosts = 'not json' WHERE hosts = '["h1"]' AND role = 'client'`); err != nil {
		t.Fatal(err)
	}
	// The operator can still list the tokens, the bad row among them.
	if out, err := cli(t, ctx, "token", "list", "--state-dir", dir); err == nil || !strings.Contains(out, "(row cannot be read)") || !strings.Contains(err.Error(), "gateway token revoke") {
		t.Fatalf("token list with an unreadable row: %v\n%s", err, out)
	}
	if _, err := cli(t, ctx, "token", "create", "--role", "admin", "--name", "spare", "--state-dir", dir); err != nil {
		t.Fatal(err)
	}
	var spare string
	if err := db.QueryRowContext(ctx, `SELECT id FROM tokens WHERE name = 'spare'`).Scan(&spare); err != nil {
		t.Fatal(err)
	}
	if _, err := cli(t, ctx, "token", "revoke", spare, "--state-dir", dir); err != nil {
		t.Fatalf("token revoke beside an unreadable row: %v", err)
	}
	base = startServe(t, dir)
	if code, body := do("GET", "/preview/h1/3000/", "", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, `"store_unavailable"`) {
		t.Fatalf("shared port, tokens not listable: %d %s; want 503 store_unavailable", code, body)
	}
	if code, body := do("GET", "/v1/hosts/h1/shares", client, ""); code != http.StatusServiceUnavailable {
		t.Fatalf("list, tokens not listable: %d %s; want 503", code, body)
	}
	// A private port in the path form with credentials the store cannot
	// check: 503, not a 401 (or a browser sent to log in again).
	if code, body := do("GET", "/preview/h1/3001/", client, ""); code != http.StatusServiceUnavailable || !strings.Contains(body, `"store_unavailable"`) {
		t.Fatalf("private port, token not checkable: %d %s; want 503 store_unavailable", code, body)
	}
	if _, err := db.ExecContext(ctx, `UPDATE tokens SET hosts = '["h1"]' WHERE hosts = 'not json'`); err != nil {
		t.Fatal(err)
	}
	// The token snapshot is retaken within its second.
	code, body := do("GET", "/preview/h1/3000/", "", "")
	offline := func() bool { return code == http.StatusServiceUnavailable && strings.Contains(body, `"host_offline"`) }
	for deadline := time.Now().Add(10 * time.Second); code == http.StatusServiceUnavailable && !offline() && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		code, body = do("GET", "/preview/h1/3000/", "", "")
	}
	if !offline() {
		t.Fatalf("shared port once the tokens list: %d %s; want the preview's 503 host_offline for a host not connected", code, body)
	}
	if code, body := do("GET", "/v1/hosts/h1/shares", client, ""); code != http.StatusOK || !strings.Contains(body, `"port":3000`) {
		t.Fatalf("list once the tokens list: %d %s; want the share kept", code, body)
	}
}

// foldDown is a store whose host lookups fail, holding rows' shares.
type foldDown struct{ *shareRows }

func (foldDown) HostIDsFold(context.Context, string) ([]string, error) {
	return nil, errors.New("store: database is locked")
}

// TestSubdomainShareWithoutStore: with the store down, a public share's
// subdomain still reaches its host, which the share names: the path form
// already did, and the subdomain answered 503 for want of the host's id
// from the store. A label no share names, or one two shared hosts fold
// to, still answers 503.
func TestSubdomainShareWithoutStore(t *testing.T) {
	ctx := testCtx(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "dev server")
	}))
	defer backend.Close()
	rows := &shareRows{rows: map[string]store.Share{}}
	ts := &tokenStates{dead: map[string]bool{}}
	g, err := newGatewayShares(ctx, rows, ts.live)
	if err != nil {
		t.Fatal(err)
	}
	var dialed []string
	preview, err := forward.NewPreview(func(ctx context.Context, hostID string, port int) (net.Conn, error) {
		dialed = append(dialed, fmt.Sprint(hostID, ":", port))
		var d net.Dialer
		return d.DialContext(ctx, "tcp", backend.Listener.Addr().String())
	}, &forward.PreviewConfig{Domain: "preview.test", Shares: g, ResolveHost: hostResolver(foldDown{rows}, g)})
	if err != nil {
		t.Fatal(err)
	}
	defer preview.Close()
	get := func(host string) (int, string) {
		t.Helper()
		w := httptest.NewRecorder()
		preview.ServeHTTP(w, httptest.NewRequestWithContext(ctx, "GET", "http://"+host+"/", nil))
		return w.Code, w.Body.String()
	}
	now := time.Now()
	share := func(host string, port int) {
		t.Helper()
		if err := g.Put(ctx, forward.Share{HostID: host, Port: port, TokenID: "t", Created: now, Expires: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	share("MyHost", 3000)
	if code, body := get("3000--myhost.preview.test"); code != http.StatusOK || body != "dev server" {
		t.Fatalf("shared port, store down: %d %s; want the dev server's page", code, body)
	}
	if !slices.Equal(dialed, []string{"MyHost:3000"}) {
		t.Fatalf("dialed %q, want MyHost:3000", dialed)
	}
	// The host's other ports stay private; the store cannot say whether
	// the caller may see them.
	if code, _ := get("3001--myhost.preview.test"); code != http.StatusUnauthorized {
		t.Fatalf("a port not shared, store down: %d, want 401", code)
	}
	if code, body := get("3000--other.preview.test"); code != http.StatusServiceUnavailable {
		t.Fatalf("a label no share names, store down: %d %s, want 503", code, body)
	}
	share("myhost", 4000)
	if code, body := get("3000--myhost.preview.test"); code != http.StatusServiceUnavailable {
		t.Fatalf("a label two shared hosts fold to, store down: %d %s, want 503", code, body)
	}
}

// TestSharesEndWithTheirHost: a share is of an enrolled host's port and
// ends with that host: after gateway host remove, an id enrolled again
// (another machine, or a sandbox given an ended one's id once its
// tombstone is trimmed) does not inherit it. It did: the share stayed
// listed and public for up to its 7 days. A share of an id never enrolled
// is refused, since it could only be inherited.
func TestSharesEndWithTheirHost(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir)
	admin := tokenMaker(t, ctx, dir)("--role", "admin")
	do := func(method, path, token, body string) (int, string) {
		t.Helper()
		return apiDo(t, ctx, base, method, path, token, body)
	}
	if code, body := do("POST", "/v1/hosts/h1/shares", admin, `{"port":3000,"ttlSeconds":600}`); code != http.StatusNotFound || !strings.Contains(body, "not enrolled") {
		t.Fatalf("share of a host never enrolled: %d %s, want 404 saying it is not enrolled", code, body)
	}
	enrollHost(t, ctx, dir, "h1")
	if code, body := do("POST", "/v1/hosts/h1/shares", admin, `{"port":3000,"ttlSeconds":600}`); code != http.StatusCreated {
		t.Fatalf("share: %d %s", code, body)
	}
	if code, body := do("GET", "/preview/h1/3000/", "", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("shared port, anonymous: %d %s, want the preview's 503 for a host not connected", code, body)
	}
	if _, err := cli(t, ctx, "host", "remove", "h1", "--state-dir", dir); err != nil {
		t.Fatal(err)
	}
	// The store keeps milliseconds: the new enrollment is a later one.
	time.Sleep(2 * time.Millisecond)
	enrollHost(t, ctx, dir, "h1")
	// A request to a shared port may take a second-old yes for its host
	// (sameHostTTL).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body := do("GET", "/preview/h1/3000/", "", "")
		if code == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the removed host's shared port, on the host enrolled again, 5 s after: %d %s, want 401 as a port never shared", code, body)
		}
	}
	if code, body := do("GET", "/v1/hosts/h1/shares", admin, ""); code != http.StatusOK || strings.Contains(body, `"port"`) {
		t.Errorf("shares of the host enrolled again: %d %s, want none", code, body)
	}
}

// TestSharesForgottenWithTheirHost: an ended execution's shares leave the
// gateway's memory when its host record is deleted (execapi's Forgot, by
// way of serving.HostForgotten), not when something next looks them up:
// they held their place in memory, and in the caps' counts, until then.
// The other hosts' shares stay.
func TestSharesForgottenWithTheirHost(t *testing.T) {
	ctx := testCtx(t)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), dbFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	key := authorizedHostKey(t)
	for _, h := range []struct{ id, kind string }{{"ex-1", store.KindDocker}, {"m-1", "machine"}} {
		if _, err := st.Enroll(ctx, store.Enrollment{HostID: h.id, Kind: h.kind, HostKey: key}); err != nil {
			t.Fatal(err)
		}
	}
	g, err := newGatewayShares(ctx, st, func(context.Context, string) (bool, error) { return true, nil })
	if err != nil {
		t.Fatal(err)
	}
	s := &serving{}
	s.OnHostForgotten(g.forgetHost)
	now := time.Now()
	for _, sh := range []forward.Share{{HostID: "ex-1", Port: 3000}, {HostID: "ex-1", Port: 3001}, {HostID: "m-1", Port: 3000}} {
		sh.TokenID, sh.Created, sh.Expires = "t", now, now.Add(time.Hour)
		if err := g.Put(ctx, sh); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.DeleteHost(ctx, "ex-1", store.KindDocker); err != nil {
		t.Fatal(err)
	}
	s.HostForgotten("ex-1")
	if n := g.mem.Count(func(sh forward.Share) bool { return sh.HostID == "ex-1" }); n != 0 {
		t.Errorf("%d shares of the forgotten host in memory, want none", n)
	}
	if n := g.mem.Count(func(sh forward.Share) bool { return sh.HostID == "m-1" }); n != 1 {
		t.Errorf("%d shares of the other host in memory, want its 1", n)
	}
}

// TestShareEndsWithItsToken: a share made with a token that expires
// before the share's ttlSeconds is answered, and listed, with the token's
// expiry, when it ends: the share goes with its token, and expiresAt
// said it would last its whole ttl.
func TestShareEndsWithItsToken(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir)
	enrollHost(t, ctx, dir, "h1")
	out, err := cli(t, ctx, "token", "create", "--role", "client", "--host", "h1", "--ttl", "1h", "--state-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	client := lastLine(out)
	code, body := apiDo(t, ctx, base, "POST", "/v1/hosts/h1/shares", client, `{"port":3000,"ttlSeconds":86400}`)
	if code != http.StatusCreated {
		t.Fatalf("share: %d %s", code, body)
	}
	var sh struct {
		ExpiresAt time.Time `json:"expiresAt"`
	}
	if err := json.Unmarshal([]byte(body), &sh); err != nil {
		t.Fatal(err)
	}
	if left := time.Until(sh.ExpiresAt); left > time.Hour {
		t.Errorf("a day's share of a token with an hour left: expiresAt in %v, past the token's expiry", left.Round(time.Minute))
	}
	code, body = apiDo(t, ctx, base, "GET", "/v1/hosts/h1/shares", client, "")
	var list struct {
		Shares []struct {
			ExpiresAt time.Time `json:"expiresAt"`
		} `json:"shares"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil || code != http.StatusOK || len(list.Shares) != 1 {
		t.Fatalf("list: %d %s", code, body)
	}
	if left := time.Until(list.Shares[0].ExpiresAt); left > time.Hour {
		t.Errorf("listed: expiresAt in %v, past the token's expiry", left.Round(time.Minute))
	}
}
