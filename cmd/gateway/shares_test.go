package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/store"
)

// TestSharesFollowTheirToken: a share outlives a gateway restart until its
// expiry, is listed, and ends with the token that made it. Shares lived in
// memory only, so a restart lost them, and a revoked token's shares stayed
// public for up to their 7 days. Host h1 never enrolls: a request the share
// lets in is answered 404 (no such host) by the preview, one it does not
// let in 401.
func TestSharesFollowTheirToken(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base, stop := startStoppable(t, dir)
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
	if code, body := do(base, "POST", "/v1/hosts/h1/shares", client, `{"port":3000,"ttlSeconds":600}`); code != http.StatusCreated {
		t.Fatalf("share: %d %s", code, body)
	}
	if code, body := do(base, "GET", "/preview/h1/3000/", "", ""); code != http.StatusNotFound {
		t.Fatalf("shared port, anonymous: %d %s, want the preview's 404 for a host never enrolled", code, body)
	}
	if code, _ := do(base, "GET", "/preview/h1/3001/", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("a port not shared, anonymous: %d, want 401", code)
	}

	// A share made from a browser login belongs to the token logged in
	// with: the session's end (a logout) leaves it.
	st, err := store.Open(ctx, filepath.Join(dir, dbFile))
	if err != nil {
		t.Fatal(err)
	}
	session, stok, err := st.CreateSession(ctx, clientID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := do(base, "POST", "/v1/hosts/h1/shares", session, `{"port":4000,"ttlSeconds":600}`); code != http.StatusCreated {
		t.Fatalf("share from a session: %d %s", code, body)
	}
	if err := st.DeleteToken(ctx, stok.ID); err != nil {
		t.Fatal(err)
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
			ExpiresAt time.Time `json:"expiresAt"`
		} `json:"shares"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil || code != http.StatusOK {
		t.Fatalf("list after a restart: %d %s", code, body)
	}
	if len(list.Shares) != 2 || list.Shares[0].Port != 3000 || list.Shares[0].By != "sharer" || time.Until(list.Shares[0].ExpiresAt) < 8*time.Minute ||
		list.Shares[1].Port != 4000 {
		t.Fatalf("shares after a restart: %+v", list.Shares)
	}
	if code, body := do(base, "GET", "/preview/h1/3000/", "", ""); code != http.StatusNotFound {
		t.Fatalf("shared port after a restart, anonymous: %d %s", code, body)
	}

	if _, err := cli(t, ctx, "token", "revoke", clientID, "--state-dir", dir); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := do(base, "GET", "/preview/h1/3000/", "", "")
		code2, _ := do(base, "GET", "/preview/h1/4000/", "", "")
		if code == http.StatusUnauthorized && code2 == http.StatusUnauthorized {
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
}
