// Package textcut shortens text for logs and error messages.
package textcut

import "unicode/utf8"

// Cut cuts s to at most n bytes, marking the cut with "…". The cut is at a
// rune boundary: one inside a character left a broken byte sequence, which
// a JSON log shows as U+FFFD and %q as \x escapes. It backs up at most
// utf8.UTFMax-1 bytes for a boundary, so bytes that are not UTF-8 are cut
// at n.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for i := n; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			n = i
			break
		}
	}
	return s[:n] + "…"
}
