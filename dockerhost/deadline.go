package dockerhost

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hostgate/hostgate/internal/deadline"
)

// LabelDeadline marks a container whose in-container deadline SetTimeout
// can move, by the kind of its main process: deadlineByScript or
// deadlineByTool. Containers made before it run a plain sleep: their
// deadline stays.
const LabelDeadline = "hostgate.deadline"

const (
	// deadlineByScript: deadlineScript under docker-init, as the sandbox's
	// uid, so that sandbox code can stop or kill it.
	deadlineByScript = "1"
	// deadlineByTool: Config.DeadlineTool as PID 1 (internal/deadline),
	// which sandbox code can neither stop, kill nor trace, but, as its
	// uid, can end: kill -TERM 1, which PID 1 honours for docker stop.
	deadlineByTool = "2"
	// deadlineByInit: Config.DeadlineTool as PID 1 under a uid of its own
	// (initUID), which sandbox code cannot signal at all, its environment
	// copy in a tmpfs only it can write (deadline.InitDir).
	deadlineByInit = "3"
)

// movableDeadline reports whether SetTimeout can move the in-container
// deadline of a container with these labels: a kind this host knows, all
// of which read deadlineDir alike.
func movableDeadline(labels map[string]string) bool {
	k := labels[LabelDeadline]
	return k == deadlineByScript || k == deadlineByTool || k == deadlineByInit
}

// deadlineDir is where SetTimeout leaves the in-container deadline's
// extension: a directory of /dev/shm (mode 1777) that uid 0 makes, through
// docker exec, so that no sandbox process (its own uid, no capability)
// can write in it, replace it or remove it.
const deadlineDir = deadline.Dir

// deadlineScript is an execution's main process, its in-container
// deadline: it sleeps the runtime ($1 seconds), then as long as
// deadlineDir is a directory not of its own uid (not a symlink: uid 0's,
// SetTimeout's) holding in "extra" more seconds past that sleep than it
// slept already, it sleeps the difference; then it ends, and the
// container with it. A sandbox process may end it early (kill it or its
// sleep), as it could end the plain sleep before, but not make it later:
// a deadlineDir of its own uid, made before SetTimeout's, is ignored (and
// SetTimeout then refuses). "extra" is read again a second later when it
// is empty (SetTimeout truncating it). No single quote: poolScript quotes
// it so.
const deadlineScript = `sleep "$1"; t=0; d=` + deadlineDir + `; while [ -d $d ] && [ ! -h $d ] && [ ! -O $d ]; do read -r x < $d/extra 2>/dev/null || { sleep 1; read -r x < $d/extra 2>/dev/null; } || break; [ "$x" -gt "$t" ] 2>/dev/null || break; sleep $((x - t)); t=$x; done`

// deadlineArgv is the main process of a container with the runtime secs
// ("-": read from stdin, the warm pool's): tool, the path of
// Config.DeadlineTool in the container, or deadlineScript without one.
func deadlineArgv(tool string, secs string) []string {
	if tool != "" {
		return []string{tool, deadline.Arg, secs}
	}
	if secs == "-" {
		return []string{"/bin/sh", "-c", poolScript}
	}
	return []string{"/bin/sh", "-c", deadlineScript, "hostgate-deadline", secs}
}

// extendScript, run as uid 0, makes deadlineDir (once) and raises "extra"
// to $1 seconds (never lowers it: the in-container deadline only moves
// later; an earlier deadline is the host's). It exits 3 when deadlineDir
// is something uid 0 did not make, and 4 when it cannot make deadlineDir
// or write "extra" otherwise: sandbox code may fill /dev/shm (its inodes
// with empty files), which is no directory of its own.
const extendScript = `d=` + deadlineDir + `; if [ -h $d ] || { [ -e $d ] && [ ! -O $d ]; }; then exit 3; fi; [ -d $d ] || mkdir -m 0755 $d || { [ -h $d ] || [ -e $d ] && exit 3; exit 4; }; x=$1; read -r o < $d/extra 2>/dev/null && [ "$o" -gt "$x" ] 2>/dev/null && x=$o; printf '%s\n' "$x" > $d/extra || exit 4`

// SetTimeout sets a live execution's deadline to now + runtimeMs (E2B's
// setTimeout): later or earlier, at most the policy's maximum runtime
// from now. Both deadlines move: the host's, and the in-container one the
// container keeps itself, which only ever moves later (an earlier
// deadline is the host's to enforce); the new deadline is kept in the
// container's name, so that a restarted host adopts it. It answers the
// execution as Get does. An execution made by a host older than
// LabelDeadline is refused (conflict).
func (h *Docker) SetTimeout(ctx context.Context, executionID string, runtimeMs int64) (*Execution, error) {
	if runtimeMs < 1 || runtimeMs > h.policy.Max.RuntimeMs {
		return nil, invalid("runtimeMs", "want 1 to %d (the gateway's maximum runtime), counted from now", h.policy.Max.RuntimeMs)
	}
	e, err := h.live(ctx, executionID)
	if err != nil {
		return nil, err
	}
	if !e.movable {
		return nil, &Error{Code: CodeConflict, Field: "executionId", Message: fmt.Sprintf("execution %q was made by an older gateway, whose containers keep a deadline that cannot move; provision a new one (or checkpoint and restore it)", executionID)}
	}
	e.deadlineMu.Lock()
	defer e.deadlineMu.Unlock()
	expires := h.now().Add(time.Duration(runtimeMs) * time.Millisecond)
	// The in-container deadline first, so that the container never ends
	// before the host's.
	if secs, ok := extension(e.Execution, expires); ok {
		ce, err := h.containerEnv(ctx, e)
		if err != nil {
			return nil, h.setTimeoutFailed(ctx, executionID, e, err)
		}
		var out strings.Builder
		code, err := h.runner.run(ctx, process{
			containerID: e.ContainerID,
			user:        "0:0",
			argv:        []string{"/bin/sh", "-c", extendScript, "sh", strconv.FormatInt(secs, 10)},
			dir:         "/",
			env:         ce.rootEnv(),
			stdout:      &capWriter{w: &out, left: 1024},
			stderr:      &capWriter{w: &out, left: 1024},
		})
		switch {
		case err != nil:
			return nil, h.setTimeoutFailed(ctx, executionID, e, fmt.Errorf("dockerhost: move the in-container deadline: %w", err))
		case code == 3:
			return nil, &Error{Code: CodeConflict, Field: "executionId", Message: fmt.Sprintf("execution %q made %s itself, where its in-container deadline is moved: its deadline cannot move", executionID, deadlineDir)}
		case code == 4:
			return nil, &Error{Code: CodeConflict, Field: "executionId", Message: fmt.Sprintf("execution %q: its in-container deadline could not be moved, as %s could not be written (%s): is its /dev/shm full? Make room there and try again", executionID, deadlineDir, strings.TrimSpace(out.String()))}
		case code != 0:
			return nil, h.setTimeoutFailed(ctx, executionID, e, fmt.Errorf("dockerhost: move the in-container deadline: exit %d: %s", code, strings.TrimSpace(out.String())))
		}
	}
	// The claim's time stays in the name: a restarted host counts the
	// in-container deadline from it (claimCreated).
	name := claimedName(claimed{id: executionID, expires: expires, runtimeMs: e.Resources.RuntimeMs, maxOutputBytes: e.Resources.MaxOutputBytes, claimedAt: e.CreatedAt})
	if err := h.api.ContainerRename(ctx, e.ContainerID, name); err != nil {
		return nil, h.setTimeoutFailed(ctx, executionID, e, fmt.Errorf("dockerhost: keep the deadline in the container's name: %w", err))
	}
	h.mu.Lock()
	if h.execs[executionID] != e || e.ending.Load() != nil {
		h.mu.Unlock()
		_, err := h.live(ctx, executionID)
		return nil, err
	}
	e.timer.Stop()
	e.ExpiresAt = expires
	e.timer = h.expiryTimer(executionID, e)
	out := e.Execution
	h.mu.Unlock()
	h.logger.Info("deadline set", "execution", executionID, "expires", expires)
	return &out, nil
}

// extension is what SetTimeout writes to "extra" for the deadline
// expires, in seconds past e's runtime, and false when the in-container
// deadline is that late already. The runtime's sleep began at e.CreatedAt
// or a little after (a fresh container is created, a pooled one claimed,
// after it was taken), so the base is never late: an extension errs long,
// the host's deadline being the one kept to the second.
func extension(e Execution, expires time.Time) (int64, bool) {
	base := e.CreatedAt.Add(time.Duration(sleepSeconds(e.Resources.RuntimeMs)) * time.Second)
	extra := expires.Sub(base)
	if extra <= 0 {
		return 0, false
	}
	return int64((extra+time.Second-1)/time.Second) + 1, true
}

// setTimeoutFailed is err, or the execution's end when it ended meanwhile.
func (h *Docker) setTimeoutFailed(ctx context.Context, id string, e *execution, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if _, lerr := h.live(context.WithoutCancel(ctx), id); lerr != nil {
		return h.endedDuring(e, lerr)
	}
	return err
}

// expiresAt is e's deadline now (SetTimeout moves it).
func (h *Docker) expiresAt(e *execution) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return e.ExpiresAt
}
