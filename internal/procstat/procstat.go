// Package procstat reads what process supervision needs from Linux's
// /proc/PID/stat (whether a process lives, its group and session) and
// kills a process of a session without hitting a reused pid. The agent's
// guard and sshlayer's session kill both scan every process with it, so a
// read costs one open and one read, into the caller's buffer.
package procstat

import (
	"bytes"
	"strconv"
)

// Buf holds one read of /proc/PID/stat: the fields up to the session id
// fit (pid, a comm of at most 64 bytes, and four short fields).
type Buf [512]byte

// Parse returns the state, process group and session id in the start of
// a /proc/PID/stat line, "pid (comm) S ppid pgrp session …", where comm
// may hold anything, parentheses and spaces included.
func Parse(b []byte) (state byte, pgrp, session int, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 || len(f[0]) != 1 {
		return 0, 0, 0, false
	}
	pgrp, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, 0, 0, false
	}
	session, err = strconv.Atoi(string(f[3]))
	if err != nil {
		return 0, 0, 0, false
	}
	return f[0][0], pgrp, session, true
}
