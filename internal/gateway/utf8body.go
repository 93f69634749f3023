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
// instead, and bytes go as base64.
type UTF8Check struct {
	r    io.Reader
	pend []byte // the start of a character the next read completes
	off  int64  // the offset of pend's first byte in the body
	bad  bool
	at   int64
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
	buf := append(c.pend, b...)
	i := 0
	for i < len(buf) {
		if buf[i] < utf8.RuneSelf {
			i++
			continue
		}
		if !utf8.FullRune(buf[i:]) && !last {
			break
		}
		r, size := utf8.DecodeRune(buf[i:])
		if r == utf8.RuneError && size == 1 {
			c.bad, c.at = true, c.off+int64(i)
			return
		}
		i += size
	}
	c.pend = append(c.pend[:0:0], buf[i:]...)
	c.off += int64(i)
}

// Err says where the body stopped being UTF-8, or is nil.
func (c *UTF8Check) Err() error {
	if !c.bad && len(c.pend) > 0 {
		c.bad, c.at = true, c.off
	}
	if !c.bad {
		return nil
	}
	return fmt.Errorf("body: not UTF-8 at byte %d: JSON text is UTF-8; send other bytes as base64 (an exec's stdin with \"encoding\": \"base64\")", c.at)
}
