package agent

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/hostgate/hostgate/internal/procstat"
)

// killSessions sends SIGKILL to every process whose session id is one of
// the tracked groups. A command with a terminal runs as a session of its
// own (its group id is the session's), where its shell's job control puts
// each background job in a group of its own, which killing the tracked
// group misses. A session id stays reserved while any process holds it,
// so a process in session N belongs to the tracked command N, never to a
// later process that reused the number. A few rounds catch what forked
// meanwhile.
func killSessions(live map[int]bool) {
	if len(live) == 0 {
		return
	}
	var buf procstat.Buf
	member := func(sid int) bool { return live[sid] }
	for range 3 {
		names, err := readProcNames()
		if err != nil {
			return
		}
		killed := 0
		for _, n := range names {
			pid, err := strconv.Atoi(n)
			if err != nil || pid <= 1 {
				continue
			}
			if fd, ok := procstat.Kill(pid, member, &buf); ok {
				killed++
				_ = unix.Close(fd)
			}
		}
		if killed == 0 {
			return
		}
	}
}

func readProcNames() ([]string, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.Readdirnames(-1)
}
