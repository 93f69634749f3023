// Package textcut shortens text for logs and error messages, and makes a
// peer's words safe to print to a terminal.
package textcut

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable is s as it may be shown on a terminal: invalid UTF-8, control
// characters (C0, DEL, C1) and bidi controls become U+FFFD. A peer's words
// printed raw could set a terminal's title, clear its screen or reorder
// what it shows.
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// PrintableLine is Printable on one line: line breaks and tabs become
// spaces.
func PrintableLine(s string) string {
	return Printable(strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, s))
}

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
