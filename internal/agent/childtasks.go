package agent

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/hostgate/hostgate/sshlayer"
)

// pidsCgroupDirs are where a container sees its own pids cgroup: cgroup
// v1's pids hierarchy, then v2's unified one.
var pidsCgroupDirs = []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup"}

// keepTasks bounds the tasks of a sandbox agent's commands
// (StdioKeys.KeepTasks). The gateway gives the container a soft nproc
// ulimit below its pids limit (dockerhost.CommandTasks), which docker
// exec's processes and the agent start with: the agent raises its own to
// the hard limit, so that its threads may take what commands leave, and
// forks its commands with the soft one (and the hard one), as docker exec
// gives them. A sandbox's pids limit counts the agent's threads, and a
// thread the Go runtime needs and cannot create is fatal: commands that
// took every pid cost the agent, and every command's channel with it.
func keepTasks(log *slog.Logger) *sshlayer.TaskLimit {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &lim); err != nil {
		log.Warn("commands' tasks unbounded: RLIMIT_NPROC unreadable", "err", err)
		return nil
	}
	tl := childTaskLimit(lim, pidsCgroupDirs, "/proc/1/status")
	if tl == nil {
		// A container made before the ulimit (or not by a gateway).
		log.Debug("commands' tasks unbounded: no soft RLIMIT_NPROC below the hard one", "soft", lim.Cur, "hard", lim.Max)
		return nil
	}
	own := unix.Rlimit{Cur: lim.Max, Max: lim.Max}
	if err := unix.Setrlimit(unix.RLIMIT_NPROC, &own); err != nil {
		log.Warn("commands' tasks: the agent could not raise its own RLIMIT_NPROC; it may run out of threads at its commands' limit", "err", err)
	}
	if tl.Count == nil {
		log.Warn("commands' tasks: no pids cgroup found; the agent's own starts may take what it keeps for its threads")
	}
	return tl
}

// childTaskLimit is what commands may hold under the agent's starting
// RLIMIT_NPROC lim, counted in the first of dirs that has pids.current,
// less the threads of the process whose status file is init when it runs
// as another uid, or nil when its soft limit is not below its hard one.
func childTaskLimit(lim unix.Rlimit, dirs []string, init string) *sshlayer.TaskLimit {
	if lim.Cur >= lim.Max || lim.Cur < 1 || lim.Cur > math.MaxInt32 {
		return nil
	}
	tl := &sshlayer.TaskLimit{Max: int(lim.Cur)}
	for _, dir := range dirs {
		path := filepath.Join(dir, "pids.current")
		if _, err := readCgroupInt(path); err == nil {
			tl.Count = func() (int, error) {
				n, err := readCgroupInt(path)
				return n - othersThreads(init), err
			}
			break
		}
	}
	return tl
}

// readCgroupInt reads a cgroup file that holds one number.
func readCgroupInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %q: not a number", path, bytes.TrimSpace(b))
	}
	return n, nil
}

// othersThreads is the threads of the process whose status file is path
// (a sandbox's PID 1) when its real uid is not this process's: a
// sandbox's deadline under a uid of its own (dockerhost's
// hostgate.deadline=3), whose threads the cgroup counts but RLIMIT_NPROC,
// which TaskLimit.Max is, does not. 0 when it is this uid's (its threads
// count against the limit, as in older sandboxes) or unreadable.
func othersThreads(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	uid, threads := -1, 0
	for _, l := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(l, []byte("Uid:")); ok {
			if f := bytes.Fields(v); len(f) > 0 {
				uid, _ = strconv.Atoi(string(f[0]))
			}
		}
		if v, ok := bytes.CutPrefix(l, []byte("Threads:")); ok {
			threads, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	if uid < 0 || uid == os.Getuid() {
		return 0
	}
	return threads
}
