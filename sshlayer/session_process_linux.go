package sshlayer

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// waitExited blocks until pid has exited without reaping it: the zombie
// keeps holding its process group id, so the group can still be signalled
// without the risk of hitting a new group that reused the id.
func waitExited(pid int) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// waitGroupGone waits, up to limit, until every process of group pgid
// other than leader has terminated. Descendants are not our children, so
// they are found in /proc and awaited through pidfds (readable once a
// process has exited). It is what lets the exit status mean "everything
// this command started is gone".
func waitGroupGone(pgid, leader int, limit time.Duration) {
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	_ = d.Close()
	deadline := time.Now().Add(limit)
	// Group members are the leader's descendants, so their pids were
	// allocated after the leader's: above it, unless pid numbers wrapped
	// since (the last pid allocated is then below the leader's). Skipping
	// the older pids spares a stat read per process on the machine on
	// every command exit.
	wrapped := lastPID() < leader
	var buf [512]byte // the fields we need are near the start of stat
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == leader || (pid < leader && !wrapped) {
			continue
		}
		// Raw syscalls: this runs for every command exit, over every
		// process on the machine.
		fd, err := unix.Open("/proc/"+n+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		k, err := unix.Read(fd, buf[:])
		_ = unix.Close(fd)
		if err != nil || k <= 0 {
			continue
		}
		state, pgrp, ok := parseProcStat(buf[:k])
		if !ok || pgrp != pgid || state == 'Z' || state == 'X' {
			continue
		}
		waitPidfd(pid, deadline)
	}
}

// lastPID returns the last pid the kernel allocated in this pid namespace,
// or 0 when unknown (which makes the caller scan every pid).
func lastPID() int {
	b, err := os.ReadFile("/proc/sys/kernel/ns_last_pid")
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil {
		return 0
	}
	return n
}

// waitPidfd waits until pid has exited or deadline passes.
func waitPidfd(pid int, deadline time.Time) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer func() { _ = unix.Close(fd) }()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms <= 0 {
			return
		}
		if _, err := unix.Poll(fds, ms); !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// parseProcStat returns the state and process group of a /proc/PID/stat
// line: "pid (comm) S ppid pgrp …", where comm may hold anything.
func parseProcStat(b []byte) (state byte, pgrp int, ok bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pgrp, err := strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pgrp, true
}
