//go:build unix

package sshlayer

import "encoding/binary"

// ttyMode is one encoded terminal mode of a pty-req (RFC 4254 §8): an
// opcode and its uint32 argument.
type ttyMode struct {
	Op  byte
	Arg uint32
}

// maxTTYModes bounds the modes kept from one request; the RFC defines
// fewer than 70 opcodes.
const maxTTYModes = 128

// parseTTYModes decodes the encoded terminal modes. Parsing stops at
// TTY_OP_END (0), at the first opcode of 160 or more (whose argument
// format is undefined, so nothing after it can be read, as the RFC says),
// or at a truncated entry; what was read until then is kept.
func parseTTYModes(b []byte) []ttyMode {
	var modes []ttyMode
	for len(b) >= 5 && len(modes) < maxTTYModes {
		op := b[0]
		if op == 0 || op >= 160 {
			break
		}
		modes = append(modes, ttyMode{Op: op, Arg: binary.BigEndian.Uint32(b[1:5])})
		b = b[5:]
	}
	return modes
}
