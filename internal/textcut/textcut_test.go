package textcut

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"ab€d", 3, "ab…"},  // € is 3 bytes: 2..4
		{"ab€d", 4, "ab…"},  // inside it still
		{"ab€d", 5, "ab€…"}, // just after it
		{"€", 1, "…"},       // nothing before it
		{"a😀b", 4, "a…"},    // 4 bytes: 1..4
		{"\x80\x80\x80\x80\x80\x80", 5, "\x80\x80\x80\x80\x80…"}, // not UTF-8: cut where asked
	} {
		if got := Cut(tc.s, tc.n); got != tc.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func FuzzCut(f *testing.F) {
	f.Add("ab€d", 3)
	f.Add("a😀b", 2)
	f.Add("\xff\x80\x80", 1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		got := Cut(s, n)
		if len(s) <= n {
			if got != s {
				t.Fatalf("Cut(%q, %d) = %q, want it whole", s, n, got)
			}
			return
		}
		kept, ok := strings.CutSuffix(got, "…")
		if !ok || !strings.HasPrefix(s, kept) || len(kept) > n || len(kept) < n-utf8.UTFMax+1 {
			t.Fatalf("Cut(%q, %d) = %q: want at most %d bytes of it, then …", s, n, got, n)
		}
		if utf8.ValidString(s) && !utf8.ValidString(kept) {
			t.Fatalf("Cut(%q, %d) = %q: cut inside a character", s, n, got)
		}
	})
}
