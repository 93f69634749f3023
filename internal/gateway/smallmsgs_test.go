package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
)

// TestTooLargeSaysLimit: a body past the API's bound is 413 saying the
// bound and what to send instead, not only that it is too large.
func TestTooLargeSaysLimit(t *testing.T) {
	e := newEnv(t, nil)
	client := e.token(store.RoleClient, "a")
	body := `{"publicKey":"` + strings.Repeat("A", maxBody) + `"}`
	req, _ := http.NewRequestWithContext(e.ctx, "POST", e.ts.URL+"/v1/hosts/a/certificates", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+client)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	we, _ := wire.ParseError(b)
	if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(we.Message, "64 KiB") {
		t.Errorf("%d %q: want 413 naming the 64 KiB limit", res.StatusCode, we.Message)
	}
}

// TestCrossOriginRefusalSaysWhatToDo: a cookie-carrying POST from another
// site's page is 403, saying what works instead: the gateway's own pages,
// or the token as a bearer, which no other page can send.
func TestCrossOriginRefusalSaysWhatToDo(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	req, _ := http.NewRequestWithContext(e.ctx, "POST", e.ts.URL+"/v1/hosts/a/certificates", strings.NewReader(`{}`))
	req.AddCookie(&http.Cookie{Name: SessionCookie, Value: admin})
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	we, _ := wire.ParseError(b)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(we.Message, "Authorization: Bearer") || !strings.Contains(we.Message, "gateway's own") {
		t.Errorf("%d %q: want 403 saying to use the gateway's own pages or send the token as Authorization: Bearer", res.StatusCode, we.Message)
	}
}
