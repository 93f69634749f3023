package forward

import (
	"fmt"
	"net/http"
	"slices"
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

// TestPreviewPathFormCookieWithPrefix: a dev server that honours
// X-Forwarded-Prefix scopes its cookies to it (a servlet container's
// session cookie takes the context path). scopeCookies put the prefix in
// front once more, so the browser kept the cookie for
// /preview/dev/P/preview/dev/P/ and never sent it back: every request
// started a new session, a login never held. A cookie already scoped
// inside the prefix keeps its path; one for the server's root or a path
// of its own is still put under the prefix.
func TestPreviewPathFormCookieWithPrefix(t *testing.T) {
	ctx := testCtx(t)
	e := newPreviewEnv(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.Header.Get("X-Forwarded-Prefix")
		http.SetCookie(w, &http.Cookie{Name: "JSESSIONID", Value: "s", Path: p})
		http.SetCookie(w, &http.Cookie{Name: "deep", Value: "d", Path: p + "/admin"})
		http.SetCookie(w, &http.Cookie{Name: "root", Value: "r", Path: "/"})
		http.SetCookie(w, &http.Cookie{Name: "own", Value: "o", Path: "/app"})
	}), nil)
	prefix := fmt.Sprintf("/preview/dev/%d", e.devPort)
	resp, _ := get(t, ctx, e.pathURL("/"))
	want := []string{
		"JSESSIONID=s; Path=" + prefix,
		"deep=d; Path=" + prefix + "/admin",
		"root=r; Path=" + prefix + "/",
		"own=o; Path=" + prefix + "/app",
	}
	if got := resp.Header.Values("Set-Cookie"); !slices.Equal(got, want) {
		t.Errorf("Set-Cookie = %q, want %q", got, want)
	}
}
