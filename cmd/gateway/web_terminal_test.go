//go:build unix

package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestTerminalResumeIsTheTokensNotTheNames: a kept terminal is resumed
// only with the token that opened it, not with another token of the same
// name (token create --name takes one already used): the other token's
// holder took over the first one's shell, and the two shared one bound
// on kept terminals.
func TestTerminalResumeIsTheTokensNotTheNames(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "state")
	base := startServe(t, dir, func(c *serveConfig) { c.TerminalKeep = time.Minute })
	token := tokenMaker(t, ctx, dir)
	alice := token("--role", "admin", "--name", "ci")
	bob := token("--role", "admin", "--name", "ci")
	t.Cleanup(runAgent(t, ctx, base, token("--role", "agent", "--host", "box")))

	dial := func(tok string, q url.Values) *websocket.Conn {
		t.Helper()
		h := http.Header{}
		h.Set("Authorization", "Bearer "+tok)
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/hosts/box/pty?"+q.Encode(), &websocket.DialOptions{HTTPHeader: h})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ws.CloseNow() })
		return ws
	}
	ws := dial(alice, url.Values{"keep": {"1"}})
	typ, b, err := ws.Read(ctx)
	var session struct{ Type, ID string }
	if err != nil || typ != websocket.MessageText || json.Unmarshal(b, &session) != nil || session.Type != "session" {
		t.Fatalf("first message: %v %q %v, want the session", typ, b, err)
	}
	_ = ws.CloseNow() // the page went: the terminal is kept for it

	resume := url.Values{"keep": {"1"}, "resume": {session.ID}, "from": {"0"}, "seq": {"1"}}
	other := dial(bob, resume)
	for {
		typ, _, err := other.Read(ctx)
		if err != nil {
			if st := websocket.CloseStatus(err); st != 4004 {
				t.Fatalf("another token of the same name resuming: %v (close %d), want close 4004 (no such terminal)", err, st)
			}
			break
		}
		if typ == websocket.MessageBinary {
			t.Fatal("another token of the same name resumed the terminal and got its output")
		}
	}

	resume.Set("seq", "2")
	mine := dial(alice, resume)
	if err := mine.Write(ctx, websocket.MessageBinary, []byte("echo back-$((6*7))\n")); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for !strings.Contains(out.String(), "back-42") {
		typ, b, err := mine.Read(ctx)
		if err != nil {
			t.Fatalf("its own token resuming: %v (output %q)", err, out.String())
		}
		if typ == websocket.MessageBinary {
			out.Write(b)
		}
	}
}
