package forward

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
)

// TestPreviewStripsPlainCookieNames: a gateway that names its cookies
// __Host-… (behind https) strips those and the plain names both, each way.
// A browser logged in before the gateway took the __Host- names keeps its
// plain hostgate_session until it expires, with a session secret still
// good: the path form, on the gateway's origin, sent it to the dev server.
func TestPreviewStripsPlainCookieNames(t *testing.T) {
	ctx := testCtx(t)
	dev := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, name := range []string{"hostgate_session", "__Host-hostgate_session", "hostgate_preview", "__Host-hostgate_preview", "app"} {
			http.SetCookie(w, &http.Cookie{Name: name, Value: "x"})
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"cookie": r.Header.Get("Cookie")})
	})
	e := newPreviewEnv(t, dev, &PreviewConfig{Authorize: allowAll,
		SessionCookie: "__Host-hostgate_session", PreviewCookie: "__Host-hostgate_preview"})
	for _, form := range []string{"path", "subdomain"} {
		req := mustReq(t, ctx, e.pathURL("/"))
		if form == "subdomain" {
			req = e.subReq(t, ctx, "GET", "/", nil)
		}
		req.Header.Set("Cookie", "a=1; hostgate_session=OLD; __Host-hostgate_session=NEW; hostgate_preview=P; __Host-hostgate_preview=Q; b=2")
		resp, body := do(t, req)
		var got map[string]string
		if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", form, resp.StatusCode, body)
		}
		if got["cookie"] != "a=1; b=2" {
			t.Errorf("%s: the dev server got Cookie %q, want a=1; b=2", form, got["cookie"])
		}
		if sc := resp.Header.Values("Set-Cookie"); slices.ContainsFunc(sc, func(c string) bool { return c != "" && c[0] != 'a' }) {
			t.Errorf("%s: Set-Cookie %q, want only the dev server's app cookie", form, sc)
		}
	}
}
