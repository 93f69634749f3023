package main

import "github.com/hostgate/hostgate/internal/textcut"

// printable is s, a gateway's words (a JSON error's message, a relay's
// close reason), as the proxy and cert print them to the terminal ssh
// shares with them: line breaks and tabs as spaces, and as U+FFFD any
// other control (ESC starts the sequences that set a window's title or
// clear the screen; C1's CSI does too), a bidi control (which reorders
// the text shown), or a byte that is not UTF-8 (0x9b alone is CSI to a
// terminal in 8-bit mode). A gateway, or anyone on a ws:// path to it,
// wrote there what it liked.
func printable(s string) string { return textcut.PrintableLine(s) }

// printableError is an error that prints as printable: gateway cert's
// errors, which quote the gateway, reach the terminal ssh's Match exec
// shares.
type printableError struct{ err error }

func (e printableError) Error() string { return printable(e.err.Error()) }
func (e printableError) Unwrap() error { return e.err }
