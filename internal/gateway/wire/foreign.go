package wire

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/hostgate/hostgate/internal/textcut"
)

// ForeignAnswer words an answer of status with body that is not the
// gateway's JSON error (ParseError found none): what answered and what to
// check. Behind a proxy, as the README deploys it, a gateway that is down
// or restarting is answered for by the proxy: nginx's 502 is a page of
// HTML, which gateway proxy, gateway cert and the Go client printed whole
// to the user, and an empty 502 read only "websocket handshake: status
// 502".
func ForeignAnswer(status int, body string) string {
	what := fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
	if s := bodySummary(body); s != "" && !strings.Contains(what, s) {
		what += fmt.Sprintf(" (%q)", s)
	}
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return "the gateway did not answer: its URL answered " + what +
			", as a proxy in front of a gateway that is down or restarting does; start the gateway (or wait for its restart), or check the proxy's upstream address"
	}
	return "its URL answered " + what + ", not the gateway's JSON: check that the URL is the gateway's --public-url, with no path beyond it"
}

// bodySummary is what a person needs of a foreign answer's body: an HTML
// page's title (or nothing, for a page without one), else its text on one
// line, at most 200 bytes.
func bodySummary(body string) string {
	s := body
	if i := indexASCIIFold(s, "<title>"); i >= 0 {
		s = s[i+len("<title>"):]
		if j := indexASCIIFold(s, "</title>"); j >= 0 {
			s = s[:j]
		}
	} else if strings.HasPrefix(strings.TrimSpace(s), "<") {
		return ""
	}
	return textcut.Cut(strings.Join(strings.Fields(s), " "), 200)
}

// indexASCIIFold is strings.Index of lower-case ASCII sub in s, ignoring
// the case of ASCII letters. Its index is s's own: strings.ToLower's was
// not, as it writes each invalid byte as a 3-byte U+FFFD and changes the
// length of some letters (K, the Kelvin sign, is 3 bytes, k 1), so a
// proxy's page of such bytes before its <title> sliced s out of range
// and crashed the agent, gateway proxy or Go client reading the answer.
func indexASCIIFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := 0
		for j < len(sub) {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != sub[j] {
				break
			}
			j++
		}
		if j == len(sub) {
			return i
		}
	}
	return -1
}
