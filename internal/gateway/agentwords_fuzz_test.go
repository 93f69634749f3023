package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzAgentWords: what an agent says of itself that the gateway keeps —
// its User-Agent, which is GET /v1/hosts' agentVersion and a label of
// hostgate_agent_tunnels, and a direct session's caller address, which is
// an audit row's — comes out valid UTF-8 without a control character
// (a label that is not UTF-8 fails the whole scrape; a newline in an audit
// field printed rows of its own) and bounded, whatever the agent sent.
func FuzzAgentWords(f *testing.F) {
	f.Add("hostgate-agent (abc123 2026-12-01T00:00:00Z go1.26)")
	f.Add("Go-http-client/1.1")
	f.Add("hostgate-agent (\xff\xfe)")
	f.Add("192.0.2.1:22")
	f.Add("[2001:db8::1%eth0]:22")
	f.Add("1.2.3.4:5\nhost evil")
	f.Add(strings.Repeat("é", 300))
	f.Fuzz(func(t *testing.T, s string) {
		r := httptest.NewRequest("GET", "http://gw/v1/agents/connect", nil)
		r.Header["User-Agent"] = []string{s}
		ua := userAgent(r)
		for name, v := range map[string]string{"userAgent": ua, "agentVersion": agentVersion(ua)} {
			if !utf8.ValidString(v) || strings.IndexFunc(v, func(c rune) bool { return !unicode.IsPrint(c) }) >= 0 {
				t.Errorf("%s(%q) = %q: not printable UTF-8", name, s, v)
			}
			if len(v) > 200+len("…") {
				t.Errorf("%s(%q): %d bytes, past its bound", name, s, len(v))
			}
		}
		rem := directRemote(s)
		if !utf8.ValidString(rem) || strings.IndexFunc(rem, func(c rune) bool { return c < 0x20 || c == 0x7f }) >= 0 {
			t.Errorf("directRemote(%q) = %q: holds a control character or is not UTF-8", s, rem)
		}
		if len(rem) > 4*100+len(`"…"`)+8 {
			t.Errorf("directRemote(%q): %d bytes, past its bound", s, len(rem))
		}
	})
}
