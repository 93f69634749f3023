package dockerhost

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// killStoppedScript, run as the execution's user, kills the process $2,
// or every process when $2 is 0, named $1 (its comm, /proc/PID/stat's
// second field) that is stopped (T, or t under a tracer) and whose parent
// is outside the container (ppid 0: docker exec started it; sandbox code
// cannot make such a process), PID 1 aside, and prints how many it
// killed. Only sh builtins: the image needs nothing more than /bin/sh.
// The user's own uid can signal nothing but its own processes.
const killStoppedScript = `want=$1; only=$2; n=0
for d in /proc/[0-9]*; do
  p=${d#/proc/}; [ "$p" != 1 ] || continue
  [ "$only" = 0 ] || [ "$p" = "$only" ] || continue
  { read -r s < "$d/stat"; } 2>/dev/null || continue
  c=${s#*\(}; c=${c%\)*}; [ "$c" = "$want" ] || continue
  set -- ${s##*\) }
  case $1 in T|t) ;; *) continue;; esac
  [ "$2" = 0 ] || continue
  kill -KILL "$p" 2>/dev/null && n=$((n+1))
done
echo $n`

// KillStopped kills process pid of a live execution (its pid in the
// container, as the agent reports it) if it is named name (the agent
// binary's base name; the kernel keeps 15 bytes of it), docker exec
// started it and it is stopped, as sandbox code may stop its agent (kill
// -STOP, as the same uid), and returns how many it killed (0 or 1). A
// stopped agent answers nothing and holds its threads of the pids limit
// until it is killed; closing its attachment does not end it while it is
// stopped. Another process of the name, which sandbox code may run and
// stop through docker exec too, is left alone. Pid 0 (an agent that
// reported none: an older one, or one stopped before it did) kills every
// process that matches.
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
	var out strings.Builder
	code, err := h.runner.run(ctx, process{
		containerID: e.ContainerID,
		user:        userOf(e.uid),
		argv:        []string{"/bin/sh", "-c", killStoppedScript, "sh", name, strconv.Itoa(pid)},
		dir:         "/",
		env:         ownEnv,
		stdout:      &capWriter{w: &out, left: 1024},
		stderr:      &capWriter{w: &out, left: 1024},
	})
	if err != nil {
		return 0, fmt.Errorf("dockerhost: kill stopped %s processes: %w", name, err)
	}
	n, perr := strconv.Atoi(strings.TrimSpace(out.String()))
	if code != 0 || perr != nil {
		return 0, fmt.Errorf("dockerhost: kill stopped %s processes: exit %d: %q", name, code, strings.TrimSpace(out.String()))
	}
	return n, nil
}
