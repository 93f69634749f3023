package gateway

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

func checkUTF8(body []byte, oneByte bool) error {
	var r io.Reader = bytes.NewReader(body)
	if oneByte {
		r = iotest.OneByteReader(r)
	}
	r, c := CheckUTF8(r)
	_, _ = io.Copy(io.Discard, r)
	return c.Err()
}

func TestCheckUTF8(t *testing.T) {
	for _, c := range []struct {
		body string
		want string
	}{
		{`{"stdin":"héllo ✓ 𝄞"}`, ""},
		{"{\"stdin\":\"\xff\xfe\"}", "body: not UTF-8 at byte 10: JSON text is UTF-8; send other bytes as base64 (an exec's stdin with \"encoding\": \"base64\")"},
		{"{\"a\":\"\xe2\x9c\"}", "body: not UTF-8 at byte 6: JSON text is UTF-8; send other bytes as base64 (an exec's stdin with \"encoding\": \"base64\")"},
		{"{\"a\":\"x\"}\xf0\x9d", "body: not UTF-8 at byte 9: JSON text is UTF-8; send other bytes as base64 (an exec's stdin with \"encoding\": \"base64\")"},
		{"\xed\xa0\x80", "body: not UTF-8 at byte 0: JSON text is UTF-8; send other bytes as base64 (an exec's stdin with \"encoding\": \"base64\")"},
	} {
		for _, one := range []bool{false, true} {
			got := ""
			if err := checkUTF8([]byte(c.body), one); err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Errorf("%q (one byte a read %v): %q, want %q", c.body, one, got, c.want)
			}
		}
	}
}

// FuzzCheckUTF8: read whole or a byte at a time, CheckUTF8 agrees with
// utf8.Valid.
func FuzzCheckUTF8(f *testing.F) {
	f.Add([]byte("héllo"))
	f.Add([]byte("\xf0\x9d\x84"))
	f.Add([]byte("a\xc0\xafb"))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, one := range []bool{false, true} {
			if err := checkUTF8(body, one); (err == nil) != utf8.Valid(body) {
				t.Fatalf("%q (one byte a read %v): %v, utf8.Valid %v", body, one, err, utf8.Valid(body))
			}
		}
	})
}
