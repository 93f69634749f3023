package bytestream

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// CheckOrigin refuses exactly the requests coder/websocket's Accept
// answers 403 for its Origin, so an endpoint that checks first refuses
// no caller Accept would have served, and lets through none it refuses.
func TestCheckOriginIsAcceptsRule(t *testing.T) {
	patterns := []string{"gw.example.com:8443", "https://*.trusted.example", "[bad"}
	for _, origin := range []string{
		"", "http://gw.example.com", "http://GW.example.com", "https://gw.example.com:8443",
		"http://evil.example", "null", "file://", "https://a.trusted.example", "http://a.trusted.example",
		"::not a url", "http://gw.example.com.evil.example",
	} {
		for _, pats := range [][]string{nil, patterns} {
			r := httptest.NewRequest("GET", "http://gw.example.com/v1/hosts/a/ssh", nil)
			r.Header.Set("Connection", "Upgrade")
			r.Header.Set("Upgrade", "websocket")
			r.Header.Set("Sec-WebSocket-Version", "13")
			r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			if origin != "" {
				r.Header.Set("Origin", origin)
			}
			w := httptest.NewRecorder() // no Hijacker: an allowed request fails later, with 501
			_, _ = websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: pats})
			acceptRefused := w.Code == http.StatusForbidden
			if err := CheckOrigin(r, pats); (err != nil) != acceptRefused {
				t.Errorf("Origin %q, patterns %q: CheckOrigin %v, Accept answered %d", origin, pats, err, w.Code)
			}
		}
	}
}

// FuzzCheckOrigin: for any Origin a peer sends, any Host, and any
// pattern, CheckOrigin refuses exactly what coder/websocket's Accept
// answers 403 for (TestCheckOriginIsAcceptsRule's rule), never panics,
// lets through no Origin of another host without a pattern, and its
// error quotes at most maxErrorText bytes of each input.
func FuzzCheckOrigin(f *testing.F) {
	for _, s := range [][3]string{
		{"", "gw.example.com", ""},
		{"http://gw.example.com", "gw.example.com", ""},
		{"http://GW.example.com", "gw.example.com", ""},
		{"null", "gw.example.com", "*"},
		{"https://a.trusted.example", "gw", "https://*.trusted.example"},
		{"http://a.trusted.example", "gw", "https://*.trusted.example"},
		{"::not a url", "gw", "[bad"},
		{"http://gw.example.com.evil.example", "gw.example.com", "gw.example.com"},
		{"http://u:p@evil.example", "evil.example", ""},
		{"http://" + strings.Repeat("x", 4096), "gw", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, origin, host, pattern string) {
		r := httptest.NewRequest("GET", "http://gw.example.com/v1/hosts/a/ssh", nil)
		r.Host = host
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", "websocket")
		r.Header.Set("Sec-WebSocket-Version", "13")
		r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		r.Header["Origin"] = []string{origin} // as sent: Set would drop what is not a valid field value
		var pats []string
		if pattern != "" {
			pats = []string{pattern}
		}
		err := CheckOrigin(r, pats)
		w := httptest.NewRecorder()
		_, _ = websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: pats})
		if (err != nil) != (w.Code == http.StatusForbidden) {
			t.Fatalf("Origin %q, Host %q, pattern %q: CheckOrigin %v, Accept answered %d", origin, host, pattern, err, w.Code)
		}
		if err == nil && pats == nil && origin != "" {
			u, perr := url.Parse(origin)
			if perr != nil || !strings.EqualFold(u.Host, host) {
				t.Fatalf("Origin %q of another host than %q let through with no pattern", origin, host)
			}
		}
		if err != nil && len(err.Error()) > 3*maxErrorText+200 {
			t.Fatalf("error of %d bytes: %.200q...", len(err.Error()), err)
		}
	})
}
