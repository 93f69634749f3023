package forward

import (
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"testing"
)

// TestPreviewInterimResponsesCarryNoCookies: a dev server's 1xx responses
// (103 Early Hints), which the proxy passes on as they come, reach the
// viewer without Set-Cookie or Clear-Site-Data, as its final response
// does; their Link headers pass. ReverseProxy writes each 1xx itself,
// past modifyResponse, so a dev server planted the gateway's session
// cookie, or a cookie for the whole preview domain, through a 103, and
// could clear the site's data.
func TestPreviewInterimResponsesCarryNoCookies(t *testing.T) {
	ctx := testCtx(t)
	dev := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Add("Link", "</app.css>; rel=preload; as=style")
		h.Add("Set-Cookie", "hostgate_session=planted; Path=/")
		h.Add("Set-Cookie", "wide=1; Domain="+testDomain)
		h.Add("Clear-Site-Data", `"cookies"`)
		w.WriteHeader(http.StatusEarlyHints)
		clear(h)
		_, _ = w.Write([]byte("hi"))
	})
	e := newPreviewEnv(t, dev, nil)
	for _, form := range []string{"path", "subdomain"} {
		req := mustReq(t, ctx, e.pathURL("/"))
		if form == "subdomain" {
			req = e.subReq(t, ctx, "GET", "/", nil)
		}
		var (
			mu      sync.Mutex
			interim []http.Header
		)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
				mu.Lock()
				defer mu.Unlock()
				interim = append(interim, http.Header(h).Clone())
				return nil
			},
		}))
		resp, body := do(t, req)
		if resp.StatusCode != http.StatusOK || body != "hi" {
			t.Fatalf("%s: %d %q", form, resp.StatusCode, body)
		}
		mu.Lock()
		if len(interim) != 1 || interim[0].Get("Link") == "" {
			t.Errorf("%s: 1xx responses %v, want the 103 with its Link", form, interim)
		}
		for _, h := range interim {
			if sc, csd := h.Values("Set-Cookie"), h.Get("Clear-Site-Data"); len(sc) != 0 || csd != "" {
				t.Errorf("%s: a 1xx carried Set-Cookie %q, Clear-Site-Data %q", form, sc, csd)
			}
		}
		mu.Unlock()
	}
}
