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
	for range 3 {
		names, err := readProcNames()
		if err != nil {
			return
		}
		killed := 0
		for _, n := range names {
			pid, err := strconv.Atoi(n)
			if err != nil || pid <= 1 || !live[session(pid, &buf)] {
				continue
			}
			// Only a member gets a pidfd (one for every process scanned
			// was most of a scan's cost), and its session is read again
			// behind it: a pid that ended and was reused between the two
			// reads is never signalled.
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue
			}
			if live[session(pid, &buf)] && unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil {
				killed++
			}
			_ = unix.Close(fd)
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

// session is pid's session id, or 0 when pid is no live process.
func session(pid int, buf *procstat.Buf) int {
	sid, _ := procstat.Session(pid, buf)
	return sid
}
