package forward

import (
	"fmt"
	"net/http"
	"testing"
)

// TestPreviewPathFormRedirectWithPrefix: the path form tells the dev
// server its prefix (X-Forwarded-Prefix), and a server that honours it
// (Spring's ForwardedHeaderFilter with relative redirects, ASP.NET's
// UsePathBase) redirects to a path that already carries it. The proxy
// put the prefix in front once more, and the browser went to
// /preview/dev/P/preview/dev/P/landing, a page the app does not have. A
// redirect inside the prefix stays as it is; one to the server's root is
// still put under it.
func TestPreviewPathFormRedirectWithPrefix(t *testing.T) {
	ctx := testCtx(t)
	e := newPreviewEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/aware":
			http.Redirect(w, r, r.Header.Get("X-Forwarded-Prefix")+"/landing?x=1", http.StatusFound)
		case "/aware-root":
			http.Redirect(w, r, r.Header.Get("X-Forwarded-Prefix"), http.StatusFound)
		case "/unaware":
			http.Redirect(w, r, "/landing", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}), nil)
	prefix := fmt.Sprintf("/preview/dev/%d", e.devPort)
	for path, want := range map[string]string{
		"/aware":      prefix + "/landing?x=1",
		"/aware-root": prefix,
		"/unaware":    prefix + "/landing",
	} {
		resp, _ := get(t, ctx, e.pathURL(path))
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || loc != want {
			t.Errorf("%s: %d Location %q, want 302 %q", path, resp.StatusCode, loc, want)
		}
	}
}
