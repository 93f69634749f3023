package agent

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
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
	var buf [512]byte
	for range 3 {
		names, err := readProcNames()
		if err != nil {
			return
		}
		killed := 0
		for _, n := range names {
			pid, err := strconv.Atoi(n)
			if err != nil || pid <= 1 || !live[procSession(pid, &buf)] {
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
			if live[procSession(pid, &buf)] && unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil {
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

// procSession returns the session id of live process pid, or 0: from
// /proc/PID/stat, "pid (comm) S ppid pgrp session …", where comm may hold
// anything. One read into buf: the fields up to the session fit, and
// os.ReadFile's stat and read to EOF cost as much again.
func procSession(pid int, buf *[512]byte) int {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	k, err := unix.Read(fd, buf[:])
	_ = unix.Close(fd)
	if err != nil || k <= 0 {
		return 0
	}
	b := buf[:k]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 || len(f[0]) != 1 || f[0][0] == 'Z' || f[0][0] == 'X' {
		return 0
	}
	sid, err := strconv.Atoi(string(f[3]))
	if err != nil {
		return 0
	}
	return sid
}
