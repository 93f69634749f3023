package gateway

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/internal/gateway/wire"
)

// FuzzRequireWebSocket: the handshake headers are a caller's.
// RequireWebSocket lets a request through exactly when it is an upgrade
// to websocket (Connection holding the token "upgrade") of version 13
// with a 16-byte key, writing nothing then; any other is answered a JSON
// error (426 with the Upgrade or version to use, 400 naming the key),
// of a bounded size.
func FuzzRequireWebSocket(f *testing.F) {
	key := base64.StdEncoding.EncodeToString(make([]byte, 16))
	f.Add("websocket", "Upgrade", "13", key)
	f.Add("WebSocket", "keep-alive, upgrade", "13", key)
	f.Add("websocket", "keep-alive,\tUPGRADE\nclose", "13", key)
	f.Add("websocket", "upgrade", "8", key)
	f.Add("websocket", "upgrade", "13", key[:20])
	f.Add("websocket", "upgrade", "13", base64.RawStdEncoding.EncodeToString(make([]byte, 16)))
	f.Add("h2c", "upgrade", "13", key)
	f.Add("websocket", "upgradex", "13", "")
	f.Add("websocket", "upgrade", strings.Repeat("13", 200), key)
	f.Fuzz(func(t *testing.T, upgrade, connection, version, key string) {
		r := httptest.NewRequest("GET", "/v1/connect", nil)
		r.Header["Upgrade"] = []string{upgrade}
		// Each line is one Connection field.
		r.Header["Connection"] = strings.Split(connection, "\n")
		r.Header["Sec-Websocket-Version"] = []string{version}
		r.Header["Sec-Websocket-Key"] = []string{key}
		isUpgrade := false
		for _, v := range r.Header["Connection"] {
			for _, tok := range strings.Split(v, ",") {
				isUpgrade = isUpgrade || strings.EqualFold(strings.TrimSpace(tok), "upgrade")
			}
		}
		isUpgrade = isUpgrade && strings.EqualFold(upgrade, "websocket")
		k, kerr := base64.StdEncoding.DecodeString(key)
		rec := httptest.NewRecorder()
		ok := RequireWebSocket(rec, r)
		var wantStatus int
		var wantIn string
		switch {
		case !isUpgrade:
			wantStatus, wantIn = http.StatusUpgradeRequired, "WebSocket only"
		case version != "13":
			wantStatus, wantIn = http.StatusUpgradeRequired, "use 13"
		case kerr != nil || len(k) != 16:
			wantStatus, wantIn = http.StatusBadRequest, "Sec-WebSocket-Key"
		}
		if wantStatus == 0 {
			if !ok || rec.Body.Len() != 0 || len(rec.Header()) != 0 {
				t.Fatalf("Upgrade %q Connection %q version %q key %q: refused: %d %q", upgrade, connection, version, key, rec.Code, rec.Body)
			}
			return
		}
		e, isErr := wire.ParseError(rec.Body.Bytes())
		if ok || rec.Code != wantStatus || !isErr || !strings.Contains(e.Message, wantIn) {
			t.Fatalf("Upgrade %q Connection %q version %q key %q: %v %d %q, want %d naming %q", upgrade, connection, version, key, ok, rec.Code, rec.Body, wantStatus, wantIn)
		}
		if wantStatus == http.StatusUpgradeRequired && rec.Header().Get("Upgrade") == "" && rec.Header().Get("Sec-WebSocket-Version") != "13" {
			t.Fatalf("a 426 that says neither the protocol nor the version to use: %q", rec.Header())
		}
		// A header is the caller's and may be as long as the server
		// reads (1 MiB): quoted whole, it made an answer of up to 4 MiB.
		if len(e.Message) > 80+4*(64+len("…")) {
			t.Fatalf("headers of %d bytes: a message of %d", len(upgrade)+len(connection)+len(version)+len(key), len(e.Message))
		}
	})
}
