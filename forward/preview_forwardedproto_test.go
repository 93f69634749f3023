package forward

import (
	"fmt"
	"net/http"
	"testing"
)

// TestPreviewRedirectKeepsHTTPS: behind a TLS-terminating proxy
// (SecureCookie: browsers reach the previews over https), a dev server
// that builds its redirects from the request it got, plain http with the
// preview's name in X-Forwarded-Host (Rails' redirect_to "/path", Spring
// behind a proxy), keeps the browser on https: the Location becomes a
// path on the preview. It sent the browser to http://{port}--{host}.DOMAIN,
// where a TLS-only front has nothing listening, and where the preview's
// Secure cookie is not sent. Over plain http such a redirect is right and
// passes as it is, as do redirects to other hosts.
func TestPreviewRedirectKeepsHTTPS(t *testing.T) {
	ctx := testCtx(t)
	dev := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		to := "http://" + r.Header.Get("X-Forwarded-Host") + r.Header.Get("X-Forwarded-Prefix") + "/login?next=%2F#top"
		if r.URL.Path == "/away" {
			to = "http://example.com/login"
		}
		http.Redirect(w, r, to, http.StatusFound)
	})
	for _, secure := range []bool{true, false} {
		e := newPreviewEnv(t, dev, &PreviewConfig{Authorize: allowAll, SecureCookie: secure})
		prefix := fmt.Sprintf("/preview/dev/%d", e.devPort)
		sub, path := "http://"+e.subHost()+"/login?next=%2F#top", fmt.Sprintf("http://%s%s/login?next=%%2F#top", e.gw.Listener.Addr(), prefix)
		if secure {
			sub, path = "/login?next=%2F#top", prefix+"/login?next=%2F#top"
		}
		resp, _ := do(t, e.subReq(t, ctx, http.MethodGet, "/", nil))
		if got := resp.Header.Get("Location"); got != sub {
			t.Errorf("SecureCookie %v, subdomain form: Location %q, want %q", secure, got, sub)
		}
		resp, _ = get(t, ctx, e.pathURL("/"))
		if got := resp.Header.Get("Location"); got != path {
			t.Errorf("SecureCookie %v, path form: Location %q, want %q", secure, got, path)
		}
		resp, _ = do(t, e.subReq(t, ctx, http.MethodGet, "/away", nil))
		if got := resp.Header.Get("Location"); got != "http://example.com/login" {
			t.Errorf("SecureCookie %v: a redirect to another host became %q", secure, got)
		}
	}
}
