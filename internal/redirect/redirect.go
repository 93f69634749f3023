// Package redirect owns the one check every "next" parameter goes through
// before the gateway redirects a browser to it: same origin, always.
package redirect

import (
	"net/url"
	"strings"
)

// LocalPath returns next when a browser sent there stays on this origin,
// and "/" otherwise. Browsers drop tabs and newlines from a URL and read
// a backslash as a slash, so "/\t/evil.example" and "/\evil.example" are
// "//evil.example" to them, another host: any control byte or backslash
// is refused, not just the prefixes.
func LocalPath(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") {
		return "/"
	}
	for i := 0; i < len(next); i++ {
		if c := next[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return "/"
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" || u.User != nil {
		return "/"
	}
	return next
}
