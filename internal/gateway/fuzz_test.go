package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
)

// FuzzAPIInput throws peer-controlled input (host id in the path, the
// enrollment headers, certificate bodies, the bearer header) at the
// handlers: never a panic, never a 500, always a JSON error.
func FuzzAPIInput(f *testing.F) {
	e := newEnv(f, nil)
	admin := e.token(store.RoleAdmin)
	agent := e.token(store.RoleAgent, "h1")
	_, key := newKey(f)
	if _, err := e.store.Enroll(e.ctx, store.Enrollment{HostID: "h1", HostKey: key}); err != nil {
		f.Fatal(err)
	}
	f.Add("h1", key, wire.EncodeInfo(hostgate.Info{Kind: "x"}), `{"publicKey":"`+key+`"}`, true)
	f.Add("..", "ssh-ed25519", "!!!", `{"publicKey":1}`, false)
	f.Add("h1%00", key+" extra\nssh-rsa AAAA", "e30", `{}`+"\x00", true)
	f.Fuzz(func(t *testing.T, id, hostKey, info, body string, useAdmin bool) {
		tok := agent
		if useAdmin {
			tok = admin
		}
		check := func(req *http.Request) {
			rec := httptest.NewRecorder()
			e.srv.Handler().ServeHTTP(rec, req)
			if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("%s %s: %d %s", req.Method, req.URL, rec.Code, rec.Body)
			}
			if rec.Code >= 400 {
				if _, ok := wire.ParseError(rec.Body.Bytes()); !ok {
					t.Fatalf("%s %s: %d without JSON error: %q", req.Method, req.URL, rec.Code, rec.Body)
				}
			}
		}
		path := "/v1/hosts/" + url.PathEscape(id)
		req := httptest.NewRequest("POST", "http://gw"+path+"/certificates", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+admin)
		check(req)
		req = httptest.NewRequest("GET", "http://gw"+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		check(req)
		req = httptest.NewRequest("GET", "http://gw"+wire.ConnectPath, nil)
		req.Header.Set("Authorization", "Bearer "+agent)
		req.Header.Set(wire.HeaderHostKey, hostKey)
		req.Header.Set(wire.HeaderInfo, info)
		check(req)
		// As an upgrade, over a real connection (a recorder cannot hijack).
		// Its own deadline: the env's ends 60 s into the whole run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		up, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+wire.ConnectPath, nil)
		up.Header = req.Header.Clone()
		wsHeaders(up.Header)
		res, err := http.DefaultClient.Do(up)
		if err != nil {
			if strings.Contains(err.Error(), "invalid header field") {
				return // the client refuses to send such a header at all
			}
			t.Fatal(err)
		}
		if res.StatusCode == http.StatusSwitchingProtocols {
			// A tunnel came up (valid key), registered before the 101:
			// the agent hangs up, and the host must go offline with it,
			// not stay "online" on a tunnel nobody serves.
			done := e.srv.Tunnels().Done("h1")
			res.Body.Close()
			if done != nil {
				select {
				case <-done:
				case <-ctx.Done():
					t.Fatal("h1's tunnel still up 30 s after its agent hung up")
				}
			}
		} else {
			b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
			res.Body.Close()
			if _, ok := wire.ParseError(b); !ok || res.StatusCode >= 500 && res.StatusCode != 503 {
				t.Fatalf("upgrade: %d %q", res.StatusCode, b)
			}
		}
		req = httptest.NewRequest("GET", "http://gw/v1/hosts", nil)
		req.Header["Authorization"] = []string{body}
		check(req)
	})
}
