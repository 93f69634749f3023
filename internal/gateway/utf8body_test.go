package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
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
		{"{\"stdin\":\"\xff\xfe\"}", "body: not UTF-8 at byte 10 (a byte, or half a \\u surrogate pair): JSON text is UTF-8; send other bytes as base64 (an exec's stdin with \"encoding\": \"base64\")"},
		{"{\"a\":\"\xe2\x9c\"}", "body: not UTF-8 at byte 6 (a byte, or half a \\u surrogate pair): JSON text is UTF-8; send other bytes as base64 (an exec's stdin with \"encoding\": \"base64\")"},
		{"{\"a\":\"x\"}\xf0\x9d", "body: not UTF-8 at byte 9 (a byte, or half a \\u surrogate pair): JSON text is UTF-8; send other bytes as base64 (an exec's stdin with \"encoding\": \"base64\")"},
		{`{"a":"\ud800"}`, "body: not UTF-8 at byte 12 (a byte, or half a \\u surrogate pair): JSON text is UTF-8; send other bytes as base64 (an exec's stdin with \"encoding\": \"base64\")"},
		{`{"a":"\udc00"}`, "body: not UTF-8 at byte 11 (a byte, or half a \\u surrogate pair): JSON text is UTF-8; send other bytes as base64 (an exec's stdin with \"encoding\": \"base64\")"},
		{`{"a":"\ud800\n"}`, "body: not UTF-8 at byte 13 (a byte, or half a \\u surrogate pair): JSON text is UTF-8; send other bytes as base64 (an exec's stdin with \"encoding\": \"base64\")"},
		{`{"a":"\ud800\ud800"}`, "body: not UTF-8 at byte 17 (a byte, or half a \\u surrogate pair): JSON text is UTF-8; send other bytes as base64 (an exec's stdin with \"encoding\": \"base64\")"},
		{`{"a":"\uD834\uDD1E \\ud800 \"\u0041"}`, ""},
		{"\xed\xa0\x80", "body: not UTF-8 at byte 0 (a byte, or half a \\u surrogate pair): JSON text is UTF-8; send other bytes as base64 (an exec's stdin with \"encoding\": \"base64\")"},
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
// utf8.Valid on a body without escapes; and refuses no JSON whose
// strings encoding/json decodes without a U+FFFD.
func FuzzCheckUTF8(f *testing.F) {
	f.Add([]byte("héllo"))
	f.Add([]byte("\xf0\x9d\x84"))
	f.Add([]byte("a\xc0\xafb"))
	f.Add([]byte(`{"a\ud800":"\uD834\uDD1E \\ud800"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, one := range []bool{false, true} {
			err := checkUTF8(body, one)
			if !bytes.Contains(body, []byte(`\`)) && (err == nil) != utf8.Valid(body) {
				t.Fatalf("%q (one byte a read %v): %v, utf8.Valid %v", body, one, err, utf8.Valid(body))
			}
			var v any
			if err != nil && json.Unmarshal(body, &v) == nil && !replaced(v) {
				t.Fatalf("%q (one byte a read %v): %v, but it decodes without U+FFFD", body, one, err)
			}
		}
	})
}

// replaced reports whether a decoded JSON value holds U+FFFD.
func replaced(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsRune(v, utf8.RuneError)
	case []any:
		return slices.ContainsFunc(v, replaced)
	case map[string]any:
		for k, e := range v {
			if replaced(k) || replaced(e) {
				return true
			}
		}
	}
	return false
}
