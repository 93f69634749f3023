package sshlayer

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hostgate/hostgate/internal/procstat"
)

// waitExited blocks until pid has exited without reaping it: the zombie
// keeps holding its process group id, so the group can still be signalled
// without the risk of hitting a new group that reused the id.
func waitExited(pid int) {
	if awaitPidfd(pid, time.Time{}) {
		return
	}
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// awaitPidfd waits until pid has exited, or deadline passes (zero: none),
// in Go's poller rather than in a blocking syscall. It reports false when
// it could not wait that way (no pidfd, or a kernel that cannot poll
// one), leaving the wait to the caller. A blocking wait holds an OS
// thread for as long as the command runs, and a sandbox's pids limit
// counts threads: 40 commands at once under pids 16 left the Go runtime
// unable to make the thread it needed, which is fatal, and the agent died.
func awaitPidfd(pid int, deadline time.Time) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return errors.Is(err, unix.ESRCH) // gone already
	}
	f, ok := pidfdFile(fd)
	defer func() { _ = f.Close() }()
	return ok && pollerWait(f, deadline)
}

// pidfdFile makes pidfd fd an *os.File, which owns it from then on, in
// Go's poller when ok.
func pidfdFile(fd int) (f *os.File, ok bool) {
	ok = unix.SetNonblock(fd, true) == nil
	return os.NewFile(uintptr(fd), "pidfd"), ok
}

// pollerWait waits in Go's poller until the process of pidfd f has exited
// or deadline passes (zero: none). It reports false when f is not in the
// poller.
func pollerWait(f *os.File, deadline time.Time) bool {
	if !deadline.IsZero() {
		if f.SetReadDeadline(deadline) != nil {
			return false // not in the poller
		}
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var fds []unix.PollFd
	err = rc.Read(func(fd uintptr) bool {
		// A pidfd is readable once its process has exited.
		fds = append(fds[:0], unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		n, err := unix.Poll(fds, 0)
		return n > 0 || err != nil && !errors.Is(err, unix.EINTR)
	})
	return err == nil || errors.Is(err, os.ErrDeadlineExceeded)
}

// forEachDescendantPID calls f with every pid that may belong to one of
// leader's descendants, given where pid allocation stood before the leader
// started. They were allocated after the leader's pid: in (leader, last]
// unless pid numbers wrapped since. When that range is short, as it is for
// a command that started few processes on a quiet host, probing it
// directly spares listing /proc, which cost more than the rest of an exec
// round trip (profiled with scripts/bench, issue 7).
func forEachDescendantPID(leader int, start pidMark, f func(pid int)) {
	// last before the count: every fork that allocated up to last is then
	// counted (the count only grows).
	last := lastPID()
	var nowForks uint64
	if last >= leader { // below, last shows a wrap on its own
		nowForks = forkCount()
		if last > 0 && nowForks > 0 {
			lastMark.Store(&pidMark{last: last, forks: nowForks})
		}
	}
	scan := choosePIDScan(leader, last, start, nowForks)
	if scan == scanProbe {
		for pid := leader + 1; pid <= last; pid++ {
			f(pid)
		}
		return
	}
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	_ = d.Close()
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid == leader || (pid < leader && scan == scanAbove) {
			continue
		}
		f(pid)
	}
}

// pidMark is where pid allocation stood at a moment: the last pid
// allocated in this pid namespace and the count of forks since boot (0:
// unknown).
type pidMark struct {
	last  int
	forks uint64
}

// markPIDs returns a mark of pid allocation for a command about to start.
// Any mark read before the leader's fork will do: the pids allocated
// since, the leader's included, are in (mark.last, last] without a wrap,
// however old it is, and a wrap since makes the forks counted outnumber
// them. In the initial pid namespace, where every fork counted allocates
// one of its pids, it is the newest a kill read (lastMark): reading one at
// every start was two reads of /proc more per command. In another (a
// container's), forks elsewhere count too, and an old mark would make
// most kills list /proc: it is read now.
func markPIDs() pidMark {
	if inInitPIDNS() {
		if m := lastMark.Load(); m != nil {
			return *m
		}
	}
	// last before the count, as in forEachDescendantPID: a fork between
	// the two reads is then counted and not allocated, at worst.
	last := lastPID()
	m := pidMark{last: last, forks: forkCount()}
	if m.last > 0 && m.forks > 0 {
		lastMark.Store(&m)
	}
	return m
}

// inInitPIDNS reports whether this process is in the initial pid
// namespace, whose inode number is fixed (PROC_PID_INIT_INO).
var inInitPIDNS = sync.OnceValue(func() bool {
	ns, err := os.Readlink("/proc/self/ns/pid")
	return err == nil && ns == "pid:[4026531836]"
})

// lastMark is the newest mark of pid allocation read, for markPIDs: pid
// numbers are the process's pid namespace's, so one for every server.
var lastMark atomic.Pointer[pidMark]

// pidScan is where forEachDescendantPID looks for a command's descendants.
type pidScan int

const (
	scanProbe pidScan = iota // each pid in (leader, last], not listing /proc
	scanAbove                // every pid in /proc above the leader's
	scanAll                  // every pid in /proc
)

// forkSlack is how many more forks than pids allocated choosePIDScan lets
// pass for the forks in flight while the two counts were read: a wrap
// allocates every free pid of the pid space, thousands of them.
const forkSlack = 64

// choosePIDScan picks the scan for a leader whose pid numbers may have
// wrapped since it started, given the last pid allocated now, where
// allocation stood before its start and the fork count now (forkCount; 0:
// unknown). Pids are allocated upwards and wrap to the bottom at pid_max,
// so without a wrap the leader's descendants are in (leader, last]. A last
// below the leader's shows a wrap, but not one that climbed past the
// leader again (pid_max 32768, a busy host, a long command): descendants
// with pids below the leader's outlived the command as orphans of init.
// The fork count tells: without a wrap, the pids allocated since the mark,
// one per fork, fit in (start.last, last]; more forks than that means pids
// may have wrapped (or forks in other pid namespaces, which are counted
// too: a container's own /proc is short to list). A wrap past the leader
// allocates every free pid on its way, so it is never taken for few forks
// unless nearly every pid is in use.
func choosePIDScan(leader, last int, start pidMark, nowForks uint64) pidScan {
	// The leader's own fork counts after the mark: a count that did not
	// move does not count (gVisor's stays 0). A mark at or above the
	// leader's pid wrapped before the leader started.
	known := start.forks > 0 && nowForks > start.forks && start.last > 0 && start.last < leader
	if last < leader || !known || nowForks-start.forks > uint64(last-start.last)+forkSlack {
		return scanAll
	}
	if last-leader <= maxPIDProbe {
		return scanProbe
	}
	return scanAbove
}

// killSession sends SIGKILL to every process of session sid but leader
// (its zombie leader, which keeps the id from being reused) and waits, up
// to limit, for them to end. Descendants are not our children, so they
// are found in /proc and awaited through pidfds (readable once a process
// has exited). It is what lets the exit status mean "everything this
// command started is gone". Every command is a session of its own, not
// only a group: a shell with job control (on a terminal, or after `set
// -m`) puts each job it starts in the background in a group of its own,
// which killing the shell's group misses, so a terminal's `sleep 300 &`
// outlived the shell's exit or a dropped connection, as an orphan of init.
// Rounds repeat while members fork. start is markPIDs() before the leader
// started.
func killSession(sid, leader int, start pidMark, limit time.Duration) {
	deadline := time.Now().Add(limit)
	var buf procstat.Buf
	var killed []int // pidfds
	for time.Now().Before(deadline) {
		killed = killed[:0]
		forEachDescendantPID(leader, start, func(pid int) {
			if fd, ok := procstat.Kill(pid, func(s int) bool { return s == sid }, &buf); ok {
				killed = append(killed, fd)
			}
		})
		if len(killed) == 0 {
			return
		}
		for _, fd := range killed {
			waitPidfd(fd, deadline)
		}
	}
}

// maxPIDProbe bounds the pids forEachDescendantPID probes one by one; beyond it
// listing /proc is cheaper.
var maxPIDProbe = 1024 // a var for the test of both scans

// lastPID returns the last pid the kernel allocated in this pid namespace,
// or 0 when unknown (which makes the caller scan every pid). A var for
// tests, which simulate a wrap of pid numbers.
var lastPID = readLastPID

func readLastPID() int {
	fd, err := unix.Open("/proc/sys/kernel/ns_last_pid", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	var b [32]byte
	k, err := unix.Read(fd, b[:])
	_ = unix.Close(fd)
	if err != nil || k <= 0 {
		return 0
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(b[:k])))
	if err != nil {
		return 0
	}
	return n
}

// forkCount returns the number of forks and clones since boot, in every
// pid namespace (/proc/stat's "processes"), or 0 when unknown. A var for
// tests, which simulate a wrap of pid numbers.
var forkCount = readForkCount

// statBufs holds /proc/stat's text, read at least once per command: a few
// KiB, more with many CPUs and interrupts.
var statBufs = sync.Pool{New: func() any { b := make([]byte, 8<<10); return &b }}

func readForkCount() uint64 {
	fd, err := unix.Open("/proc/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer func() { _ = unix.Close(fd) }()
	bp := statBufs.Get().(*[]byte)
	defer statBufs.Put(bp)
	b := *bp
	n := 0
	for {
		if n == len(b) {
			b = append(b, make([]byte, len(b))...)
			*bp = b
		}
		k, err := unix.Read(fd, b[n:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0
		}
		n += k
		// Done at the line's end: the read to EOF is one syscall more.
		if c, whole := parseForkCount(b[:n], k == 0); whole {
			return c
		}
		if k == 0 {
			return 0
		}
	}
}

// parseForkCount returns the count on /proc/stat's "processes" line (0:
// none, or not a count), and whether that line is whole: it ends in
// stat, or stat is all of the file (atEOF).
func parseForkCount(stat []byte, atEOF bool) (count uint64, whole bool) {
	const key = "\nprocesses "
	i := bytes.Index(stat, []byte(key))
	if i < 0 {
		return 0, atEOF
	}
	line := stat[i+len(key):]
	j := bytes.IndexByte(line, '\n')
	if j < 0 && !atEOF {
		return 0, false
	}
	if j >= 0 {
		line = line[:j]
	}
	c, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 10, 64)
	if err != nil {
		return 0, true
	}
	return c, true
}

// waitPidfd waits until the process of pidfd fd has exited or deadline
// passes, in Go's poller where it can, and closes fd.
func waitPidfd(fd int, deadline time.Time) {
	f, ok := pidfdFile(fd)
	defer func() { _ = f.Close() }()
	if ok && pollerWait(f, deadline) {
		return
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { pollPidfd(int(fd), deadline) })
}

// pollPidfd waits until pidfd fd's process has exited or deadline passes.
func pollPidfd(fd int, deadline time.Time) {
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

// setOOMScoreAdj sets pid's oom_score_adj. An unprivileged process may
// raise its children's, not lower them.
func setOOMScoreAdj(pid, adj int) error {
	return os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte(strconv.Itoa(adj)), 0)
}

// ptraceRefused is set once a start's PTRACE_TRACEME was refused (a
// seccomp profile, Yama's ptrace_scope 2 or 3): later starts go untraced,
// and their command gets ChildOOMScoreAdj only after it starts.
var ptraceRefused atomic.Bool

// cldTrapped is siginfo's si_code for a traced child's stop (CLD_TRAPPED).
const cldTrapped = 4

// startWithOOMScoreAdj starts c with oom_score_adj adj from its first
// instruction, which its children inherit: c starts traced
// (PTRACE_TRACEME), so it stops at its execve's SIGTRAP before it runs;
// this thread, its tracer, writes adj to its /proc/PID/oom_score_adj and
// detaches, suppressing the SIGTRAP. set reports whether adj was written;
// if not, the caller writes it after the start, as it did for every start
// before (too late for a shell and a child it forks at once: 281 of 400
// runs of `cat /proc/self/oom_score_adj & wait` read 0).
//
// Not by raising the server's own around the fork and lowering it back
// (aa9ce0b, reverted): a sandbox's agent binary is execute-only, so the
// kernel starts it non-dumpable, its /proc/self files are root's from its
// first instruction, and it cannot open its own oom_score_adj (EACCES in
// every start in a sandbox). Its commands' binaries are readable: they
// are dumpable after their exec, and theirs opens. Nothing is changed in
// the server, so concurrent starts need no lock.
func startWithOOMScoreAdj(c *exec.Cmd, adj int, log *slog.Logger) (set bool, err error) {
	if ptraceRefused.Load() {
		return false, c.Start()
	}
	attr := syscall.SysProcAttr{}
	if c.SysProcAttr != nil {
		attr = *c.SysProcAttr
	}
	attr.Ptrace = true
	c.SysProcAttr = &attr
	// The tracer is the thread that forked: the stop is awaited and
	// detached from it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := c.Start(); err != nil {
		if !errors.Is(err, syscall.EPERM) {
			return false, err
		}
		// PTRACE_TRACEME refused (or the execve itself: then it is
		// refused again, untraced, and reported as it was before).
		attr.Ptrace = false
		*c = exec.Cmd{Path: c.Path, Args: c.Args, Env: c.Env, Dir: c.Dir, Stdin: c.Stdin, Stdout: c.Stdout, Stderr: c.Stderr, ExtraFiles: c.ExtraFiles, SysProcAttr: &attr}
		if err := c.Start(); err != nil {
			return false, err
		}
		if !ptraceRefused.Swap(true) {
			log.Warn("oom_score_adj: a command cannot be started traced (PTRACE_TRACEME refused); commands get theirs only after they start, which a command's first children may beat", "adj", adj, "err", err)
		}
		return false, nil
	}
	pid := c.Process.Pid
	var info unix.Siginfo
	for {
		// WNOWAIT: a command killed before it stopped stays for its
		// reaper.
		err = unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil || info.Code != cldTrapped {
		log.Warn("oom_score_adj: a command started traced did not stop at its exec", "pid", pid, "code", info.Code, "err", err)
		return false, nil // exited (killed): nothing to detach
	}
	werr := setOOMScoreAdj(pid, adj)
	if werr != nil {
		// Its binary not readable by its user (non-dumpable, as the
		// agent's own): the write after the start fails the same way.
		log.Warn("oom_score_adj: not set for a command stopped at its exec", "pid", pid, "adj", adj, "err", werr)
	}
	if err := unix.PtraceDetach(pid); err != nil && !errors.Is(err, unix.ESRCH) {
		// It would stay stopped, traced by a thread that will not
		// resume it: not a command that runs.
		_ = c.Process.Kill()
		log.Error("oom_score_adj: a command stopped at its exec could not be resumed; killed", "pid", pid, "err", err)
		return false, nil
	}
	return werr == nil, nil
}

// withMaxTasks runs start, which forks, with this process's soft
// RLIMIT_NPROC lowered to tasks, so that the child inherits it: set after
// the fork (prlimit), it came too late for a command's first builtin
// (`ulimit -a` read the server's under CI's load) and for what the
// command forked first.
func withMaxTasks(tasks int, start func() error, log *slog.Logger) error {
	var own unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &own); err != nil {
		log.Warn("command tasks: RLIMIT_NPROC unreadable; the command is not bound by it", "err", err)
		return start()
	}
	low := unix.Rlimit{Cur: min(uint64(tasks), own.Max), Max: own.Max}
	if err := unix.Setrlimit(unix.RLIMIT_NPROC, &low); err != nil {
		log.Warn("command tasks: RLIMIT_NPROC not lowered; the command is not bound by it", "err", err)
		return start()
	}
	err := start()
	if rerr := unix.Setrlimit(unix.RLIMIT_NPROC, &own); rerr != nil {
		log.Error("command tasks: RLIMIT_NPROC not restored; the server's threads are bound as its commands are", "err", rerr)
	}
	return err
}
