//go:build unix

package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// TestTerminalOfOfflineHostSaysWhatToDo: the terminal page of a host whose
// agent stopped says that its agent is not connected and how to bring it
// back; it said "cannot start a terminal on box: gateway: host offline",
// the Go error, and left the person guessing.
func TestTerminalOfOfflineHostSaysWhatToDo(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir)
	token := tokenMaker(t, ctx, dir)
	admin := token("--role", "admin")
	runAgent(t, ctx, base, token("--role", "agent", "--host", "box"))()

	waitOffline(t, ctx, base, admin, "box")

	h := http.Header{}
	h.Set("Authorization", "Bearer "+admin)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/hosts/box/pty", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	typ, b, err := ws.Read(ctx)
	if err != nil || typ != websocket.MessageText {
		t.Fatalf("first message: %v %q %v, want the spawn error", typ, b, err)
	}
	var msg struct{ Type, Message string }
	if err := json.Unmarshal(b, &msg); err != nil {
		t.Fatal(err)
	}
	want := "cannot start a terminal on box: its agent is not connected to the gateway: start it on the host (agent connect), then reload this page"
	if msg.Type != "error" || msg.Message != want {
		t.Fatalf("terminal of an offline host says %q, want %q", msg.Message, want)
	}
}

// TestTerminalEndedByLogoutSaysToLogIn: a web terminal whose login ends (a
// logout in another tab) tells its page to log in again; it showed
// "terminal closed: gateway: the session's token was revoked or expired".
func TestTerminalEndedByLogoutSaysToLogIn(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir)
	token := tokenMaker(t, ctx, dir)
	admin := token("--role", "admin")
	t.Cleanup(runAgent(t, ctx, base, token("--role", "agent", "--host", "box")))

	form := func(path string, body url.Values, cookie *http.Cookie) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, "POST", base+path, strings.NewReader(body.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		if cookie != nil {
			req.AddCookie(cookie)
		}
		res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	res := form("/login", url.Values{"token": {admin}}, nil)
	if len(res.Cookies()) != 1 {
		t.Fatalf("login: %d %v", res.StatusCode, res.Cookies())
	}
	cookie := res.Cookies()[0]

	h := http.Header{}
	h.Set("Origin", base)
	h.Set("Cookie", cookie.Name+"="+cookie.Value)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/hosts/box/pty", &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("echo up-$((6*7))\n")); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for !strings.Contains(out.String(), "up-42") {
		typ, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("before the logout: %v (output %q)", err, out.String())
		}
		if typ == websocket.MessageBinary {
			out.Write(b)
		}
	}

	if res := form("/logout", nil, cookie); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", res.StatusCode)
	}
	want := "terminal closed: the login that opened it ended (logged out, revoked or expired): reload the page to log in again"
	for {
		typ, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("the terminal closed without saying why: %v", err)
		}
		var msg struct{ Type, Message string }
		if typ != websocket.MessageText || json.Unmarshal(b, &msg) != nil || msg.Type != "error" {
			continue
		}
		if msg.Message != want {
			t.Fatalf("after the logout the terminal says %q, want %q", msg.Message, want)
		}
		return
	}
}
