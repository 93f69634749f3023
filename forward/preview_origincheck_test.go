package forward

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The origin checks of web frameworks' CSRF protection, as their sources
// make them, on the request a dev server gets. Each says why it refuses,
// or "".

// nextServerAction is Next.js's check of a Server Action
// (packages/next/src/server/app-render/action-handler.ts, handleAction
// and parseHostHeader): Origin's host against X-Forwarded-Host's first
// value, or Host without it.
func nextServerAction(r *http.Request) string {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	originHost := "null"
	if origin != "null" {
		originHost = jsURLHost(origin)
	}
	host := r.Host
	if xfh := r.Header.Get("X-Forwarded-Host"); xfh != "" {
		first, _, _ := strings.Cut(xfh, ",")
		host = strings.TrimSpace(first)
	}
	if host == "" || originHost != host {
		return fmt.Sprintf("Next.js: host %q does not match origin %q: Invalid Server Actions request", host, originHost)
	}
	return ""
}

// railsOrigin is Rails' valid_request_origin? (request.origin ==
// request.base_url): base_url is X-Forwarded-Proto's scheme (the
// connection's, plain http here, without it) and X-Forwarded-Host's last
// value (Host without it), its port left out when the scheme's default.
func railsOrigin(r *http.Request) string {
	origin := r.Header.Get("Origin")
	if origin == "null" {
		return "Rails: the request's Origin is null"
	}
	if origin == "" {
		return ""
	}
	scheme := "http"
	if xfp := r.Header.Get("X-Forwarded-Proto"); xfp != "" {
		vals := strings.Split(xfp, ",")
		scheme = strings.TrimSpace(vals[len(vals)-1])
	}
	authority := r.Host
	if xfh := r.Header.Get("X-Forwarded-Host"); xfh != "" {
		vals := strings.Split(xfh, ",")
		authority = strings.TrimSpace(vals[len(vals)-1])
	}
	if h, port, err := net.SplitHostPort(authority); err == nil && port == map[string]string{"http": "80", "https": "443"}[scheme] {
		authority = h
	}
	if base := scheme + "://" + authority; origin != base {
		return fmt.Sprintf("Rails: HTTP Origin header (%s) didn't match request.base_url (%s)", origin, base)
	}
	return ""
}

// djangoOrigin is Django's CsrfViewMiddleware._origin_verified with its
// defaults (no CSRF_TRUSTED_ORIGINS, USE_X_FORWARDED_HOST or
// SECURE_PROXY_SSL_HEADER): Origin against http:// and Host.
func djangoOrigin(r *http.Request) string {
	origin, ok := r.Header["Origin"]
	if !ok {
		return ""
	}
	if good := "http://" + r.Host; origin[0] != good {
		return fmt.Sprintf("Django: Origin checking failed - %s does not match any trusted origins (%s)", origin[0], good)
	}
	return ""
}

// svelteKitOrigin is SvelteKit's csrf check of a form's POST in its dev
// server: Origin against the origin of the URL it builds from Host.
func svelteKitOrigin(r *http.Request) string {
	origin := r.Header.Get("Origin")
	if want := "http://" + jsURLHost("http://"+r.Host); origin != want {
		return fmt.Sprintf("SvelteKit: Cross-site POST form submissions are forbidden (origin %s, url.origin %s)", origin, want)
	}
	return ""
}

// jsURLHost is new URL(s).host: the scheme's default port left out.
func jsURLHost(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	if p := u.Port(); p == map[string]string{"http": "80", "https": "443"}[u.Scheme] {
		return u.Hostname()
	}
	return u.Host
}

// TestPreviewFormPostPassesFrameworkOriginChecks: a form on a preview's
// page posts to its dev server, and the framework's CSRF origin check
// lets it through, for each of Next.js (Server Actions), Rails, Django
// and SvelteKit. The proxy rewrote a same-origin Origin to
// http://localhost:{port}, the Host it sends, for those comparing Origin
// with Host (Django, SvelteKit, WebSocket servers), but left the
// preview's name in X-Forwarded-Host, against which Next.js and Rails
// compare it: every Server Action aborted ("Invalid Server Actions
// request") and every Rails form failed its origin check. A form posted
// from another site stays refused by all four.
func TestPreviewFormPostPassesFrameworkOriginChecks(t *testing.T) {
	ctx := testCtx(t)
	checks := []func(*http.Request) string{nextServerAction, railsOrigin, djangoOrigin, svelteKitOrigin}
	dev := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var refused []string
		for _, check := range checks {
			if why := check(r); why != "" {
				refused = append(refused, why)
			}
		}
		if len(refused) != 0 {
			http.Error(w, strings.Join(refused, "\n"), http.StatusForbidden)
			return
		}
		_, _ = w.Write([]byte("posted"))
	})
	e := newPreviewEnv(t, dev, &PreviewConfig{Authorize: allowAll, UnsandboxedPathForm: true})
	post := func(urlStr, host, origin string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, urlStr, strings.NewReader("name=x"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		if host != "" {
			req.Host = host
		}
		resp, body := do(t, req)
		return resp.StatusCode, body
	}
	forms := []struct{ name, url, host, origin string }{
		{"subdomain form", e.gw.URL + "/form", e.subHost(), "http://" + e.subHost()},
		// Only where the path form is not sandboxed: a sandboxed page's
		// Origin is null, which every one of them refuses.
		{"path form", e.pathURL("/form"), "", e.gw.URL},
	}
	for _, f := range forms {
		if code, body := post(f.url, f.host, f.origin); code != http.StatusOK {
			t.Errorf("%s: a form posted from the preview's page: %d\n%s", f.name, code, body)
		}
		code, body := post(f.url, f.host, "http://evil.example")
		if code != http.StatusForbidden || len(strings.Split(strings.TrimSpace(body), "\n")) != len(checks) {
			t.Errorf("%s: a form posted from another site: %d, want each framework to refuse it\n%s", f.name, code, body)
		}
	}
}
