package gateway

import (
	"encoding/json"
	"net/http"

	"github.com/hostgate/hostgate/internal/gateway/wire"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// writeError answers {error: {code, message}}. The message is for people;
// code is stable for programs.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, wire.ErrorBody{Error: wire.Error{Code: code, Message: msg}})
}
