//go:build unix

package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
)

// Alive reports whether process pid runs; a zombie waiting for its reaper
// counts as gone. Linux answers from /proc, other Unixes (macOS has no
// /proc) from ps, whose state column starts with Z for a zombie.
func Alive(pid int) bool {
	var state byte
	if runtime.GOOS == "linux" {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		// The state follows the parenthesised command name.
		i := bytes.LastIndexByte(b, ')')
		if err != nil || i <= 0 || i+2 >= len(b) {
			return false
		}
		state = b[i+2]
	} else {
		out, err := exec.Command("ps", "-o", "stat=", "-p", strconv.Itoa(pid)).Output()
		out = bytes.TrimSpace(out)
		if err != nil || len(out) == 0 {
			return false
		}
		state = out[0]
	}
	return state != 'Z' && state != 'X'
}
