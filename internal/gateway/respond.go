package gateway

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/textcut"
)

// WriteJSON answers v as JSON with status, uncached and not sniffed: the
// one writer of every JSON answer, the gateway's hooks included.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	WriteJSONHeader(w, status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

// WriteJSONHeader sends WriteJSON's status and headers, for an answer
// whose body its caller writes itself.
func WriteJSONHeader(w http.ResponseWriter, status int) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
}

// WriteError answers {error: {code, message}}. The message is for people;
// code is stable for programs.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	WriteJSON(w, status, wire.ErrorBody{Error: wire.Error{Code: code, Message: msg}})
}

// WriteEndedError answers WriteError's body with the reason and time
// (RFC 3339, UTC, to the nanosecond) of an execution that ended: the gone
// answer, or the conflict refusing its id. The executions API and a
// sandbox's host routes both write it, so that a caller reads one shape
// (the Go client's APIError.Reason and EndedAt) from either.
func WriteEndedError(w http.ResponseWriter, status int, code, msg, reason string, endedAt time.Time) {
	WriteJSON(w, status, wire.ErrorBody{Error: EndedError(code, msg, reason, endedAt)})
}

// EndedError is WriteEndedError's error, for a body that carries more
// (an exec's output so far).
func EndedError(code, msg, reason string, endedAt time.Time) wire.Error {
	e := wire.Error{Code: code, Message: msg, Reason: reason}
	if !endedAt.IsZero() {
		e.EndedAt = endedAt.UTC().Format(time.RFC3339Nano)
	}
	return e
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
// is not a WebSocket handshake this gateway can complete (a GET: coder/
// websocket would answer the method, the version and the key in plain
// text), and reports whether r is one.
func RequireWebSocket(w http.ResponseWriter, r *http.Request) bool {
	// A GET route takes HEAD too, and the WebSocket library refuses it
	// only at the upgrade, in plain text: an agent's HEAD had by then
	// replaced its host's live tunnel and audited one, a caller's had
	// opened a stream to the host, and a terminal's audited a session.
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed here: a WebSocket handshake is a GET")
		return false
	}
	if !isWebSocket(r) {
		w.Header().Set("Upgrade", "websocket")
		WriteError(w, http.StatusUpgradeRequired, "websocket_required", "this endpoint speaks WebSocket only")
		return false
	}
	if v := r.Header.Get("Sec-WebSocket-Version"); v != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
		// Cut: the header is the caller's, up to the server's 1 MiB.
		WriteError(w, http.StatusUpgradeRequired, "websocket_version", fmt.Sprintf("WebSocket version %q is not supported; use 13", textcut.Cut(v, 64)))
		return false
	}
	if k, err := base64.StdEncoding.DecodeString(r.Header.Get("Sec-WebSocket-Key")); err != nil || len(k) != 16 {
		WriteError(w, http.StatusBadRequest, "bad_request", "Sec-WebSocket-Key must be 16 bytes in base64")
		return false
	}
	return true
}

// JSONBodyError words a request body's JSON decoding error for the
// caller: the field and the JSON kind it wants, never the Go type behind
// it ("cannot unmarshal array into Go value of type gateway.certRequest").
func JSONBodyError(err error) string {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		want := jsonKind(ute.Type)
		if ute.Field == "" {
			return fmt.Sprintf("the body must be a JSON %s, not %s", want, article(ute.Value))
		}
		return fmt.Sprintf("%s: want a JSON %s, got %s", ute.Field, want, article(ute.Value))
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return strings.Trim(f, `"`) + ": unknown field"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) && se.Error() == "invalid character 'ï' looking for beginning of value" {
		// Byte 0xEF where a value begins: a UTF-8 byte order mark, which
		// editors ("UTF-8 with BOM") and PowerShell 5's -Encoding UTF8
		// put before a file's text; encoding/json names it as the
		// Latin-1 character of that one byte.
		return fmt.Sprintf("body: not valid JSON: a UTF-8 byte order mark (bytes EF BB BF) at byte %d, which JSON text must not have (RFC 8259 §8.1): send the body without it (save the file as UTF-8 without BOM)", se.Offset-1)
	}
	return "body: not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")
}

func jsonKind(t reflect.Type) string {
	if t == nil {
		return "value"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "value"
}

// article puts "a"/"an" before encoding/json's name of a JSON value
// ("array", "number 1.5", "string") or a token's role.
func article(v string) string {
	if v != "" && strings.ContainsRune("aeiou", rune(v[0])) {
		return "an " + v
	}
	return "a " + v
}
