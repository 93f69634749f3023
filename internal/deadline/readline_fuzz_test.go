//go:build linux

package deadline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
)

// FuzzReadLine: Run's "-" reads the runtime from stdin, the warm pool's
// pipe, which then stays the container's main process's stdin: readLine
// must consume the line and its newline and not a byte past them, and
// at most 32 bytes of a line that never ends, whatever the bytes. A line
// read is a number of seconds exactly when parseSecs takes it, in range,
// and a refusal quotes what was refused.
func FuzzReadLine(f *testing.F) {
	for _, s := range []string{"", "\n", "60\n", "60\nrest", "60", strings.Repeat("9", 31) + "\n", strings.Repeat("9", 32) + "\n", "-1\n", "+5\n", "4294967297\n", " 5\n", "\x00\xff\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		l := readLine(r)
		consumed := len(in) - r.Len()
		i := bytes.IndexByte(in, '\n')
		switch {
		case i >= 0 && i < 32:
			if l.err != nil || l.text != string(in[:i]) || consumed != i+1 {
				t.Fatalf("%q: %+v after %d bytes, want %q after %d", in, l, consumed, in[:i], i+1)
			}
		case len(in) < 32:
			want := io.ErrUnexpectedEOF
			if len(in) == 0 {
				want = io.EOF
			}
			if !errors.Is(l.err, want) || consumed != len(in) {
				t.Fatalf("%q: %+v after %d bytes, want %v after all", in, l, consumed, want)
			}
			return
		default:
			if l.err == nil || !strings.Contains(l.err.Error(), "longer than 32") || consumed != 32 {
				t.Fatalf("%q: %+v after %d bytes, want a line too long after 32", in, l, consumed)
			}
			return
		}
		n, err := parseSecs(l.text)
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", l.text)) {
				t.Fatalf("parseSecs(%q): %v does not quote it", l.text, err)
			}
			return
		}
		if m, perr := strconv.ParseInt(l.text, 10, 64); perr != nil || m != n || n < 0 || n > maxSecs {
			t.Fatalf("parseSecs(%q) = %d, want it from 0 to %d", l.text, n, int64(maxSecs))
		}
	})
}
