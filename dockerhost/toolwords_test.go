package dockerhost

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestToolWordsKeepsTheReason: a line of tar's naming a path of 5 KB,
// written in chunks of any size, keeps its start and its reason at the
// end, cut at rune boundaries, and three lines at most are answered. A
// 4 KB capture ended inside the path, and a cut at 512 bytes kept only
// its start.
func TestToolWordsKeepsTheReason(t *testing.T) {
	path := strings.Repeat("dé/", 1700) + "f"
	line := "tar: can't make dir " + path + ": File name too long\n"
	for _, tc := range []struct {
		name, out string
		lines     int
	}{
		{"one line", line, 1},
		{"forty lines", strings.Repeat(line, 40), 3},
		{"no newline at the end", strings.TrimSuffix(line, "\n"), 1},
	} {
		var c lineCutter
		for rest := tc.out; rest != ""; {
			n := min(len(rest), 1+rand.IntN(700))
			if k, err := c.Write([]byte(rest[:n])); k != n || err != nil {
				t.Fatalf("%s: write %d: %d, %v", tc.name, n, k, err)
			}
			rest = rest[n:]
		}
		got := toolWords(c.String())
		if whole := toolWords(tc.out); got != whole {
			t.Errorf("%s: cut as written %q, cut whole %q", tc.name, got, whole)
		}
		if !strings.HasPrefix(got, "tar: can't make dir dé/dé/") || !utf8.ValidString(got) || len(got) > maxEngineWords+len("…") {
			t.Errorf("%s: %q (%d bytes)", tc.name, got, len(got))
		}
		if n := strings.Count(got, ": File name too long"); n != tc.lines {
			t.Errorf("%s: the reason %d times in %q, want %d", tc.name, n, got, tc.lines)
		}
		if more := strings.HasSuffix(got, "; …"); more != (tc.lines == 3) {
			t.Errorf("%s: %q: says more lines were cut: %v", tc.name, got, more)
		}
	}
	if got := toolWords("tar: short\n"); got != "tar: short" {
		t.Errorf("a short line: %q", got)
	}
}
