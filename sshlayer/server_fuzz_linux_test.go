package sshlayer

import (
	"fmt"
	"testing"
)

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("1234 (sleep) S 1 1234 1234 0 -1 4194560 97 0 0 0"), "sleep", byte('S'), 1234)
	f.Add([]byte("7 (a) b) c) Z 1 99 7"), "a) b) c", byte('Z'), 99)
	f.Fuzz(func(t *testing.T, b []byte, comm string, state byte, pgrp int) {
		_, _, _ = parseProcStat(b) // must not panic on anything
		if !(state >= 'A' && state <= 'Z' || state >= 'a' && state <= 'z') || pgrp < 0 {
			return
		}
		// Whatever the command name holds, the fields after it are found.
		line := fmt.Sprintf("42 (%s) %c 1 %d 42 0", comm, state, pgrp)
		st, pg, ok := parseProcStat([]byte(line))
		if !ok || st != state || pg != pgrp {
			t.Fatalf("%q: got %c %d %v", line, st, pg, ok)
		}
	})
}
