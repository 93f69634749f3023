package main

import "strings"

// printable is s, a gateway's words (a JSON error's message, a relay's
// close reason), as the proxy and cert print them to the terminal ssh
// shares with them: line breaks and tabs as spaces, and as U+FFFD any
// other control (ESC starts the sequences that set a window's title or
// clear the screen; C1's CSI does too), a bidi control (which reorders
// the text shown), or a byte that is not UTF-8 (0x9b alone is CSI to a
// terminal in 8-bit mode). A gateway, or anyone on a ws:// path to it,
// wrote there what it liked.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			return ' '
		case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e || r == 0x200f || r == 0x061c:
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// printableError is an error that prints as printable: gateway cert's
// errors, which quote the gateway, reach the terminal ssh's Match exec
// shares.
type printableError struct{ err error }

func (e printableError) Error() string { return printable(e.err.Error()) }
func (e printableError) Unwrap() error { return e.err }
