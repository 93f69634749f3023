package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hostgate/hostgate/bytestream"
)

// TestProxyPrintsTheGatewaysWordsPrintable: what the gateway says, its
// JSON error's message and a relay's close reason, reaches ssh's
// terminal through the proxy's stderr (and gateway cert's, which ssh's
// Match exec shows). A gateway, or anyone on a ws:// or http:// path to
// it, put escape sequences there (a window title set, the screen
// cleared, a line that erases the one before): they came through as
// sent. Controls now show as U+FFFD, line breaks and tabs as spaces; the
// words stay.
func TestProxyPrintsTheGatewaysWordsPrintable(t *testing.T) {
	const hostile = "stop\x1b]0;pwned\x07 here\r\nnext\u202e line\x9b2J"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/certificates") || r.URL.Query().Has("refuse") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error":{"code":"forbidden","message":"`+strings.NewReplacer("\x1b", `\u001b`, "\x07", `\u0007`, "\r", `\r`, "\n", `\n`, "\x9b", `\u009b`).Replace(hostile)+`"}}`)
			return
		}
		c, err := bytestream.Accept(w, r, nil)
		if err != nil {
			return
		}
		_ = bytestream.CloseWithReason(c, bytestream.StatusPolicyViolation, hostile)
	}))
	defer srv.Close()
	check := func(what, out string) {
		t.Helper()
		if !strings.Contains(out, "stop") || !strings.Contains(out, "next") {
			t.Errorf("%s: %q lost the gateway's words", what, out)
		}
		if !utf8.ValidString(out) {
			t.Errorf("%s: %q is not UTF-8 (a lone byte 0x9b is a terminal's CSI)", what, out)
		}
		if i := strings.IndexFunc(strings.TrimSuffix(out, "\n"), func(r rune) bool {
			return r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || r == '\u202e'
		}); i >= 0 {
			t.Errorf("%s: %q holds control character %q", what, out, out[i:i+1])
		}
	}
	for _, u := range []string{srv.URL, srv.URL + "/?refuse"} {
		var stderr bytes.Buffer
		local, other := net.Pipe()
		go func() { _, _ = io.Copy(io.Discard, other) }()
		_ = proxy(t.Context(), local, &stderr, u, "tok", "box", proxyOptions{relayOnly: true})
		_ = other.Close()
		check("proxy "+u, stderr.String())
	}
	var stderr bytes.Buffer
	err := run(t.Context(), stdio{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &stderr}, []string{"cert", "--url", srv.URL, "--token", "tok", "--key", t.TempDir() + "/k", "box"})
	if err == nil {
		t.Fatal("cert: no error from a refusal")
	}
	check("cert", err.Error())
}
