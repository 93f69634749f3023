package forward

import (
	"net/http"
	"strings"
	"testing"
)

// TestPreviewDropsViewersProxyHeaders: headers a proxy in front of an app
// sets to say who the client is and how it came (X-Real-IP, Client-IP,
// Forwarded, X-Forwarded-Port, -Prefix, -Ssl, -Scheme) reach the dev
// server only as the preview sets them. A viewer's own passed through, so
// a dev server trusting its loopback peer as a proxy (Rails, Express with
// trust proxy, Rack reading Forwarded before X-Forwarded-*) took the
// viewer for any address, host or scheme the viewer named, where the
// proxy sets X-Forwarded-For, -Host and -Proto itself.
func TestPreviewDropsViewersProxyHeaders(t *testing.T) {
	ctx := testCtx(t)
	spoofed := map[string]string{
		"X-Real-IP":          "203.0.113.7",
		"Client-IP":          "203.0.113.7",
		"Forwarded":          "for=203.0.113.7;host=evil.example;proto=https",
		"X-Forwarded-Port":   "443",
		"X-Forwarded-Prefix": "/evil",
		"X-Forwarded-Ssl":    "on",
		"X-Forwarded-Scheme": "https",
	}
	dev := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got []string
		for name, v := range spoofed {
			for _, have := range r.Header.Values(name) {
				if strings.Contains(have, v) {
					got = append(got, name+": "+have)
				}
			}
		}
		_, _ = w.Write([]byte(strings.Join(got, "\n")))
	})
	e := newPreviewEnv(t, dev, nil)
	for name, req := range map[string]*http.Request{
		"subdomain form": e.subReq(t, ctx, http.MethodGet, "/", nil),
		"path form": func() *http.Request {
			r, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.pathURL("/"), nil)
			return r
		}(),
	} {
		for k, v := range spoofed {
			req.Header.Set(k, v)
		}
		if resp, body := do(t, req); resp.StatusCode != http.StatusOK || body != "" {
			t.Errorf("%s: %d, the dev server got the viewer's own:\n%s", name, resp.StatusCode, body)
		}
	}
}
