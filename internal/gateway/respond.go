package gateway

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/hostgate/hostgate/internal/gateway/wire"
)

// WriteJSON answers v as JSON with status, uncached and not sniffed: the
// one writer of every JSON answer, the gateway's hooks included.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// WriteError answers {error: {code, message}}. The message is for people;
// code is stable for programs.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	WriteJSON(w, status, wire.ErrorBody{Error: wire.Error{Code: code, Message: msg}})
}

// isWebSocket reports whether r asks for a WebSocket upgrade. Endpoints
// check it before doing anything (pinning a key, opening a stream), so a
// plain request gets a JSON error and changes nothing.
func isWebSocket(r *http.Request) bool {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return false
	}
	for _, v := range r.Header.Values("Connection") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "upgrade") {
				return true
			}
		}
	}
	return false
}

// RequireWebSocket answers, with the API's JSON errors, a request that
// is not a WebSocket handshake this gateway can complete (coder/websocket
// would answer the version and key in plain text), and reports whether r
// is one.
func RequireWebSocket(w http.ResponseWriter, r *http.Request) bool {
	if !isWebSocket(r) {
		w.Header().Set("Upgrade", "websocket")
		WriteError(w, http.StatusUpgradeRequired, "websocket_required", "this endpoint speaks WebSocket only")
		return false
	}
	if v := r.Header.Get("Sec-WebSocket-Version"); v != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
		WriteError(w, http.StatusUpgradeRequired, "websocket_version", fmt.Sprintf("WebSocket version %q is not supported; use 13", v))
		return false
	}
	if k, err := base64.StdEncoding.DecodeString(r.Header.Get("Sec-WebSocket-Key")); err != nil || len(k) != 16 {
		WriteError(w, http.StatusBadRequest, "bad_request", "Sec-WebSocket-Key must be 16 bytes in base64")
		return false
	}
	return true
}
