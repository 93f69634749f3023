package forward

import (
	"net/http"
	"strings"
	"testing"
)

// TestPreviewSubdomainCookieDomainAttributes: a subdomain preview passes
// on no Set-Cookie that names a Domain, however the dev server writes it.
// net/http keeps the last Domain attribute, even an empty one, and took
// "a=1; Domain=preview.test; Domain=" for a host-only cookie, which it
// passed on word for word; a browser that follows RFC 6265 ignores the
// empty attribute and scopes the cookie to preview.test, every host's
// previews (and the gateway under that domain). A quoted value, which
// net/http leaves unparsed, went the same way.
func TestPreviewSubdomainCookieDomainAttributes(t *testing.T) {
	ctx := testCtx(t)
	lines := []string{
		"a=1; Domain=preview.test; Domain=",
		"b=2; Path=/; Domain=\"preview.test\"",
		"c=3; domain=preview.test; DOMAIN=",
		"d=4; Max-Age=60",
	}
	dev := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, l := range lines {
			w.Header().Add("Set-Cookie", l)
		}
	})
	e := newPreviewEnv(t, dev, &PreviewConfig{Authorize: allowAll})
	resp, _ := do(t, e.subReq(t, ctx, "GET", "/", nil))
	got := resp.Header.Values("Set-Cookie")
	for _, l := range got {
		for _, av := range strings.Split(l, ";")[1:] {
			name, _, _ := strings.Cut(av, "=")
			if strings.EqualFold(strings.TrimSpace(name), "domain") {
				t.Errorf("Set-Cookie %q names a Domain", l)
			}
		}
	}
	if len(got) != len(lines) {
		t.Errorf("Set-Cookie %q, want one for each of the dev server's %d", got, len(lines))
	}
	if got[len(got)-1] != "d=4; Max-Age=60" {
		t.Errorf("a cookie without Domain became %q, want it word for word", got[len(got)-1])
	}
}
