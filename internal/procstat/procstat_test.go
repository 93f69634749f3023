package procstat

import (
	"testing"
)

func TestParseSession(t *testing.T) {
	for _, tc := range []struct {
		line    string
		state   byte
		session int
		ok      bool
	}{
		{"42 (sh) S 1 42 40 0 -1", 'S', 40, true},
		{"42 (a) b) c) Z 1 42 40 0", 'Z', 40, true}, // comm holds ") "
		{"42 (x y) R 1 2 3", 'R', 3, true},
		{"42 (sh) S 1 42", 0, 0, false}, // cut before the session
		{"42 sh S 1 42 40", 0, 0, false},
		{"42 (sh) SS 1 42 40", 0, 0, false},
		{"42 (sh) S 1 42 x", 0, 0, false},
		{"", 0, 0, false},
	} {
		state, session, ok := ParseSession([]byte(tc.line))
		if state != tc.state || session != tc.session || ok != tc.ok {
			t.Errorf("ParseSession(%q) = %q %d %v, want %q %d %v", tc.line, state, session, ok, tc.state, tc.session, tc.ok)
		}
	}
}

func FuzzParseSession(f *testing.F) {
	f.Add([]byte("42 (sh) S 1 42 40 0 -1"))
	f.Add([]byte("1 ()) Z 0 0 -5"))
	f.Fuzz(func(t *testing.T, b []byte) {
		state, session, ok := ParseSession(b)
		if !ok && (state != 0 || session != 0) {
			t.Fatalf("not ok, yet %q %d", state, session)
		}
	})
}
