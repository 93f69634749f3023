package main

import "testing"

// TestCookieChecksWithoutFetchMetadata: a browser that sends no fetch
// metadata (Safari before 16.4, Firefox before 90) still sends Origin on
// a POST or a CORS request, and one naming another origin is another
// site's request: the session cookie (path form) and a preview's own
// cookie (subdomain form) must not authorize it, as they do not when the
// browser says same-site. Only WebSockets were checked by Origin: a page
// on one host's preview could post into another host's previews with the
// viewer's login. Requests without Origin (curl, links, images) stay
// allowed, as does the own origin.
func TestCookieChecksWithoutFetchMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want bool
	}{
		{"no metadata, no Origin (curl)", nil, true},
		{"other host's page, post", map[string]string{":method": "POST", "Origin": "http://3000--evil.preview.test"}, false},
		{"other host's page, cors fetch", map[string]string{"Origin": "http://3000--evil.preview.test"}, false},
		{"sandboxed page, post", map[string]string{":method": "POST", "Origin": "null"}, false},
		{"own origin, post", map[string]string{":method": "POST", "Origin": "http://gw.test"}, true},
	} {
		if got := cookieUseAllowed(withHeaders("http://gw.test/preview/b/8080/", tc.hdr), nil); got != tc.want {
			t.Errorf("path form, %s: %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want bool
	}{
		{"no metadata, no Origin (curl)", nil, true},
		{"other host's page, post", map[string]string{":method": "POST", "Origin": "http://3000--evil.preview.test"}, false},
		{"other host's page, cors fetch", map[string]string{"Origin": "http://3000--evil.preview.test"}, false},
		{"the gateway's page, post", map[string]string{":method": "POST", "Origin": "http://gw.test"}, false},
		{"own page, post", map[string]string{":method": "POST", "Origin": "http://3000--h1.preview.test"}, true},
		{"same host, other port", map[string]string{":method": "POST", "Origin": "http://5173--h1.preview.test"}, true},
	} {
		if got := previewCookieUseAllowed(withHeaders("http://3000--h1.preview.test/", tc.hdr), "h1", "preview.test"); got != tc.want {
			t.Errorf("subdomain form, %s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
