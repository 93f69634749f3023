package procstat

import (
	"fmt"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		line          string
		state         byte
		pgrp, session int
		ok            bool
	}{
		{"42 (sh) S 1 42 40 0 -1", 'S', 42, 40, true},
		{"42 (a) b) c) Z 1 99 40 0", 'Z', 99, 40, true}, // comm holds ") "
		{"42 (x y) R 1 2 3", 'R', 2, 3, true},
		{"42 (sh) S 1 42", 0, 0, 0, false}, // cut before the session
		{"42 sh S 1 42 40", 0, 0, 0, false},
		{"42 (sh) SS 1 42 40", 0, 0, 0, false},
		{"42 (sh) S 1 x 40", 0, 0, 0, false},
		{"42 (sh) S 1 42 x", 0, 0, 0, false},
		{"", 0, 0, 0, false},
	} {
		state, pgrp, session, ok := Parse([]byte(tc.line))
		if state != tc.state || pgrp != tc.pgrp || session != tc.session || ok != tc.ok {
			t.Errorf("Parse(%q) = %q %d %d %v, want %q %d %d %v", tc.line, state, pgrp, session, ok, tc.state, tc.pgrp, tc.session, tc.ok)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("1234 (sleep) S 1 1234 1234 0 -1 4194560 97 0 0 0"), "sleep", byte('S'), 1234, 1200)
	f.Add([]byte("7 (a) b) c) Z 1 99 7"), "a) b) c", byte('Z'), 99, 7)
	f.Fuzz(func(t *testing.T, b []byte, comm string, state byte, pgrp, session int) {
		_, _, _, _ = Parse(b) // must not panic on anything
		if !(state >= 'A' && state <= 'Z' || state >= 'a' && state <= 'z') || pgrp < 0 || session < 0 {
			return
		}
		// Whatever the command name holds, the fields after it are found.
		line := fmt.Sprintf("42 (%s) %c 1 %d %d 0", comm, state, pgrp, session)
		st, pg, sid, ok := Parse([]byte(line))
		if !ok || st != state || pg != pgrp || sid != session {
			t.Fatalf("%q: got %c %d %d %v", line, st, pg, sid, ok)
		}
	})
}
