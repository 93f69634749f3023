package forward

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestPreviewKeepsCookiesNetHTTPRefuses: a dev server's cookie reaches the
// browser with its name and value as the dev server wrote them, in both
// forms, whether or not net/http would parse it. Python's frameworks
// (Starlette and FastAPI, Django, Flask's werkzeug) quote a value holding
// JSON with backslash escapes, and PHP names array cookies cart[1]:
// browsers take both, net/http refuses them, and the preview dropped every
// such cookie (a subdomain preview's too, without a Domain to take off),
// so the app lost it through the preview alone. A value net/http does
// parse but writes otherwise (a space or a comma, which it quotes) came
// back quoted, another value to the app.
func TestPreviewKeepsCookiesNetHTTPRefuses(t *testing.T) {
	ctx := testCtx(t)
	cookies := []struct{ line, pair string }{
		{`prefs="{\"theme\": \"dark\"}"; Path=/; SameSite=lax`, `prefs="{\"theme\": \"dark\"}"`},
		{`list="a\054b"; Path=/`, `list="a\054b"`},
		{"cart[1]=3; path=/", "cart[1]=3"},
		{"greeting=hello world; Domain=preview.localhost; Path=/", "greeting=hello world"},
		{"pair=x,y; Domain=localhost", "pair=x,y"},
	}
	e := newPreviewEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, c := range cookies {
			w.Header().Add("Set-Cookie", c.line)
		}
	}), nil)
	prefix := fmt.Sprintf("/preview/dev/%d", e.devPort)
	for _, form := range []string{"subdomain", "path"} {
		req := e.subReq(t, ctx, http.MethodGet, "/", nil)
		if form == "path" {
			req = mustReq(t, ctx, e.pathURL("/"))
		}
		resp, _ := do(t, req)
		got := resp.Header.Values("Set-Cookie")
		if len(got) != len(cookies) {
			t.Errorf("%s form: Set-Cookie %q, want one for each of the dev server's %d", form, got, len(cookies))
			continue
		}
		for i, l := range got {
			pair, attrs, _ := strings.Cut(l, ";")
			if pair != cookies[i].pair {
				t.Errorf("%s form: the dev server's %q reached the browser as %q", form, cookies[i].line, l)
			}
			if namesDomain(l) {
				t.Errorf("%s form: %q names a Domain", form, l)
			}
			if form == "path" && !strings.Contains(attrs, "Path="+prefix+"/") {
				t.Errorf("path form: %q is not scoped to %s/", l, prefix)
			}
		}
	}
}
