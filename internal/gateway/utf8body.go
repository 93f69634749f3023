package gateway

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// UTF8Check watches a JSON body go by on its way to a decoder and notes
// the first byte that is not UTF-8. JSON text is UTF-8 (RFC 8259 §8.1);
// encoding/json turns each such byte inside a string into U+FFFD without
// a word, so an exec's stdin (or command, or env value) sent as raw bytes
// reached the command changed. A body that is not UTF-8 is refused
// instead, and bytes go as base64. So is a \u escape of half a UTF-16
// surrogate pair ("\ud800" alone), which encoding/json turns into U+FFFD
// the same way.
type UTF8Check struct {
	r    io.Reader
	pend []byte // the start of a character the next read completes
	off  int64  // the offset of pend's first byte in the body
	bad  bool
	at   int64

	// Where the body is in JSON's strings and escapes.
	inStr, esc bool
	hex        int  // 1 + the \u digits read so far; 0 outside a \u escape
	code       rune // their value
	high       bool // a high surrogate's escape came last: a low one must follow
}

// CheckUTF8 returns the reader to decode a body r from and the check to
// ask, once the body is read, whether it was all UTF-8.
func CheckUTF8(r io.Reader) (io.Reader, *UTF8Check) {
	c := &UTF8Check{r: r}
	return c, c
}

func (c *UTF8Check) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if !c.bad {
		c.scan(p[:n], err != nil)
	}
	return n, err
}

func (c *UTF8Check) scan(b []byte, last bool) {
	buf := b
	if len(c.pend) > 0 {
		buf = append(c.pend, b...)
	}
	i := 0
	for i < len(buf) {
		if c.inStr && !c.esc && c.hex == 0 && !c.high {
			// The run of a string's plain ASCII, most of a body.
			for i < len(buf) && buf[i] < utf8.RuneSelf && buf[i] != '"' && buf[i] != '\\' {
				i++
			}
			if i == len(buf) {
				break
			}
		}
		if buf[i] < utf8.RuneSelf {
			if !c.ascii(buf[i]) {
				c.bad, c.at = true, c.off+int64(i)
				return
			}
			i++
			continue
		}
		if !utf8.FullRune(buf[i:]) && !last {
			break
		}
		r, size := utf8.DecodeRune(buf[i:])
		if r == utf8.RuneError && size == 1 || c.high {
			c.bad, c.at = true, c.off+int64(i)
			return
		}
		i += size
	}
	c.pend = append(c.pend[:0:0], buf[i:]...)
	c.off += int64(i)
}

// ascii follows JSON's strings and escapes by one ASCII byte b, and
// reports false where a surrogate escape goes unpaired. The decoder checks
// the rest of the syntax.
func (c *UTF8Check) ascii(b byte) bool {
	switch {
	case !c.inStr:
		c.inStr = b == '"'
	case c.hex > 0:
		c.code = c.code<<4 | rune(unhex(b))
		if c.hex++; c.hex <= 4 {
			return true
		}
		c.hex = 0
		switch {
		case c.high:
			c.high = false
			return c.code >= 0xDC00 && c.code <= 0xDFFF
		case c.code >= 0xD800 && c.code <= 0xDBFF:
			c.high = true
		case c.code >= 0xDC00 && c.code <= 0xDFFF:
			return false
		}
	case c.esc:
		c.esc = false
		if b == 'u' {
			c.hex, c.code = 1, 0
		} else if c.high {
			return false
		}
	case b == '\\':
		c.esc = true
	case c.high:
		return false
	case b == '"':
		c.inStr = false
	}
	return true
}

func unhex(b byte) byte {
	switch {
	case b >= '0' && b <= '9':
		return b - '0'
	case b >= 'a' && b <= 'f':
		return b - 'a' + 10
	case b >= 'A' && b <= 'F':
		return b - 'A' + 10
	}
	return 0
}

// Err says where the body stopped being UTF-8, or is nil.
func (c *UTF8Check) Err() error {
	if !c.bad && len(c.pend) > 0 {
		c.bad, c.at = true, c.off
	}
	if !c.bad {
		return nil
	}
	return fmt.Errorf("body: not UTF-8 at byte %d (a byte, or half a \\u surrogate pair): JSON text is UTF-8; send other bytes as base64 (an exec's stdin with \"encoding\": \"base64\")", c.at)
}

// CheckBody returns the reader to decode a body r into v from, and the
// check to ask once v is decoded: the body was UTF-8 (CheckUTF8) and held
// no key twice in one object (CheckKeys). The gateway's and the
// executions API's decoders both use it.
func CheckBody(r io.Reader, v any) (io.Reader, func() error) {
	r, keys := CheckKeys(r, v)
	r, text := CheckUTF8(r)
	return r, func() error {
		if err := text.Err(); err != nil {
			return err
		}
		return keys.Err()
	}
}
