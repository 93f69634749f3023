package bytestream

import (
	"net/http"
	"net/http/httptest"
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
