package dockerhost

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// killStoppedScript, run as the execution's user, looks for the process
// $2, or any process when $2 is 0, named $1 (its comm, /proc/PID/stat's
// second field) that is stopped (T, or t under a tracer) and whose parent
// is outside the container (ppid 0: docker exec started it; sandbox code
// cannot make such a process), PID 1 aside. It kills the one it finds and
// prints 1; finding none it prints 0; finding several (only $2 = 0 can)
// it kills none and prints "?", how many, and the first
// maxStoppedCandidates pids. A stat of more than one line is skipped: its
// comm holds a newline, which sandbox code may give its processes
// (/proc/self/comm) and no agent's name has, and its first line alone
// could read as anything ("sleep) T 0\n…" made a running process of the
// sandbox's read as a stopped sleep that docker exec started).
// Only sh builtins: the image needs nothing more than /bin/sh. The user's
// own uid can signal nothing but its own processes.
const killStoppedScript = `want=$1; only=$2; n=0; found=
for d in /proc/[0-9]*; do
  p=${d#/proc/}; [ "$p" != 1 ] || continue
  [ "$only" = 0 ] || [ "$p" = "$only" ] || continue
  { { read -r s && ! read -r x; } < "$d/stat"; } 2>/dev/null || continue
  c=${s#*\(}; c=${c%\)*}; [ "$c" = "$want" ] || continue
  set -- ${s##*\) }
  case $1 in T|t) ;; *) continue;; esac
  [ "$2" = 0 ] || continue
  n=$((n+1)); [ "$n" -gt 16 ] || found="$found $p"
done
case $n in
0) echo 0;;
1) if kill -KILL $found 2>/dev/null; then echo 1; else echo 0; fi;;
*) echo "? $n$found";;
esac`

// killStoppedWait is how long KillStopped waits for its script, which
// takes milliseconds on an idle engine. It runs as the sandbox's uid (the
// container's root, every capability dropped, may signal no other uid),
// so sandbox code may stop it as it stops the agent (kill -STOP -1 in a
// loop): without a bound of its own KillStopped then waited as long as its
// caller did, for ever for one without a deadline. Under execapi's 30 s
// bound, so that its caller hears why.
const killStoppedWait = 20 * time.Second

// maxStoppedCandidates is how many pids killStoppedScript names at most
// when it finds several; it is the 16 of its script.
const maxStoppedCandidates = 16

// StoppedCandidatesError is KillStopped's refusal to pick among several
// stopped processes of the name when it was given no pid: which of them is
// the agent is unknown, and killing them all would kill sandbox code's.
type StoppedCandidatesError struct {
	ExecutionID string
	Name        string
	Count       int   // how many matched
	PIDs        []int // at most maxStoppedCandidates of them, as the container numbers them, in number order
}

func (e *StoppedCandidatesError) Error() string {
	return fmt.Sprintf("dockerhost: execution %s has %d stopped processes named %q that docker exec started (pids %v), and which is the agent is unknown (an older agent reports no pid, a new one stopped early has not yet, and the gateway sees no engine process to map it by): none killed, as sandbox code's would go too; kill the agent's yourself (docker exec -u UID CONTAINER kill -KILL PID), or run the gateway in the engine's pid namespace",
		e.ExecutionID, e.Count, e.Name, e.PIDs)
}

// KillStopped kills process pid of a live execution (its pid in the
// container, as the agent reports it or Stdio.PID maps it) if it is named
// name (the agent binary's base name; the kernel keeps 15 bytes of it),
// docker exec started it and it is stopped, as sandbox code may stop its
// agent (kill -STOP, as the same uid), and returns how many it killed (0
// or 1). A stopped agent answers nothing and holds its threads of the
// pids limit until it is killed; closing its attachment does not end it
// while it is stopped. Another process of the name, which sandbox code
// may run and stop through docker exec too, is left alone. Pid 0 (the
// agent's is unknown) kills the one process that matches, if exactly one
// does; several are refused with a *StoppedCandidatesError, none killed.
// Its script, which sandbox code may stop too, is waited for
// killStoppedWait at most: then it fails saying so.
func (h *Docker) KillStopped(ctx context.Context, executionID, name string, pid int) (int, error) {
	if pid < 0 {
		return 0, invalid("pid", "must not be negative")
	}
	if len(name) > 15 {
		name = name[:15]
	}
	e, err := h.live(ctx, executionID)
	if err != nil {
		return 0, err
	}
	wait := h.killStoppedWait
	if wait <= 0 {
		wait = killStoppedWait
	}
	rctx, cancel := context.WithTimeoutCause(ctx, wait, errKillStoppedHeld)
	defer cancel()
	var out strings.Builder
	code, err := h.runner.run(rctx, process{
		containerID: e.ContainerID,
		user:        userOf(e.uid),
		argv:        []string{"/bin/sh", "-c", killStoppedScript, "sh", name, strconv.Itoa(pid)},
		dir:         "/",
		env:         ownEnv,
		stdout:      &capWriter{w: &out, left: 1024},
		stderr:      &capWriter{w: &out, left: 1024},
	})
	if errors.Is(err, errKillStoppedHeld) && ctx.Err() == nil {
		return 0, fmt.Errorf("dockerhost: kill stopped %s processes of execution %s: its script, run as the sandbox's uid, did not finish in %v: sandbox code may have stopped it (kill -STOP, as it may stop the agent), or the engine is slow; whether it kills the agent once it runs again is unknown. Terminate the execution if its agent stays silent", name, executionID, wait)
	}
	if err != nil {
		return 0, fmt.Errorf("dockerhost: kill stopped %s processes: %w", name, err)
	}
	res := strings.TrimSpace(out.String())
	if code == 0 {
		if cerr := parseCandidates(res); cerr != nil {
			cerr.ExecutionID, cerr.Name = executionID, name
			return 0, cerr
		} else if n, perr := strconv.Atoi(res); perr == nil && (n == 0 || n == 1) {
			return n, nil
		}
	}
	return 0, fmt.Errorf("dockerhost: kill stopped %s processes: exit %d: %q", name, code, res)
}

// errKillStoppedHeld is the cause of KillStopped's script's end at
// killStoppedWait.
var errKillStoppedHeld = errors.New("kill-stopped script held")

// parseCandidates parses killStoppedScript's "? N PID…", nil if res is
// not that.
func parseCandidates(res string) *StoppedCandidatesError {
	f := strings.Fields(res)
	if len(f) < 4 || f[0] != "?" {
		return nil
	}
	e := &StoppedCandidatesError{}
	var err error
	if e.Count, err = strconv.Atoi(f[1]); err != nil || e.Count < 2 {
		return nil
	}
	for _, s := range f[2:] {
		p, err := strconv.Atoi(s)
		if err != nil || p <= 0 {
			return nil
		}
		e.PIDs = append(e.PIDs, p)
	}
	if len(e.PIDs) > min(e.Count, maxStoppedCandidates) {
		return nil
	}
	// The script's glob lists /proc as strings sort (10 before 9).
	slices.Sort(e.PIDs)
	return e
}
