package hostgate

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// watchdogScript runs "$@" so that its whole process tree ends when the
// process is killed, ctx is cancelled or the connection is lost. It uses
// only POSIX sh, kill and sleep, plus setsid where the host has it:
//
//   - The command runs in the background in its own process group: setsid
//     (util-linux, busybox) where present, else `set -m` job control where
//     the shell allows it without a terminal (bash does, dash does not),
//     else in the shell's group — then only the command itself can be
//     signalled, not its descendants (a documented limit).
//   - Inside that group, before exec'ing the command, a small sh forks the
//     poller: stdio on /dev/null (so it never holds the output pipes),
//     forwarded signals ignored. Every second it checks that the watchdog
//     shell and the transport process that started it are alive; when
//     either is gone — the connection was lost, or the watchdog was
//     SIGKILLed — it kills the group. Forking it from inside the group
//     leaves no moment where the command runs unwatched.
//   - The command's stdin is the watchdog's stdin (fd 3 carries it past the
//     /dev/null an asynchronous list would get); stdout and stderr pass
//     through.
//   - Every signal RFC 4254 names but KILL and USR1, sent to the watchdog,
//     is forwarded to the group; USR1 means "kill": the group gets SIGKILL
//     (a shell cannot trap KILL, so Process.Kill(KILL) sends USR1, and
//     Process.Kill(USR1) is refused: it cannot reach the command). Signals that
//     arrive before the command runs are remembered and delivered once it
//     does.
//   - A program whose name starts with '-' runs as a plain command, not
//     by exec, which bash and busybox ash would take it for an option of
//     (shell.Exec says why).
//   - A wait interrupted by a trap is repeated, so the status is the
//     command's own.
//   - Limit: the command is not the foreground job of a terminal, so under
//     a PTY it has no controlling terminal (setsid) or is a background job.
//     Transports that offer PTYs (SSH) own supervision and skip the
//     watchdog.
//   - When the command exits, what is left in its group (the poller too) is
//     killed, and an exit by signal (status 129…159) is re-raised so the
//     transport reports the signal.
const watchdogScript = `pending=
for s in TERM INT HUP QUIT USR2 ALRM ABRT PIPE FPE ILL SEGV; do trap "pending=$s" "$s"; done
trap 'pending=KILL' USR1
exec 3<&0
shell=$$
parent=$PPID
poll='s=$1 p=$2; shift 2
(
  exec </dev/null >/dev/null 2>&1
  trap "" TERM INT HUP QUIT USR2 ALRM ABRT PIPE FPE ILL SEGV
  while kill -0 "$s" 2>/dev/null && { [ "$p" -le 1 ] || kill -0 "$p" 2>/dev/null; }; do sleep 1; done
  kill -s KILL -- "-$$" 2>/dev/null || { kill -0 "$$" 2>/dev/null && kill -s KILL "$$"; }
) &
case $1 in -*) "$@" ;; *) exec "$@" ;; esac'
if command -v setsid >/dev/null 2>&1; then
  setsid sh -c "$poll" hostgate-watched "$shell" "$parent" "$@" 0<&3 3<&- &
elif set -m 2>/dev/null && case $- in *m*) true;; *) false;; esac; then
  sh -c "$poll" hostgate-watched "$shell" "$parent" "$@" 0<&3 3<&- &
else
  sh -c "$poll" hostgate-watched "$shell" "$parent" "$@" 0<&3 3<&- &
fi
pid=$!
exec 3<&-
killtree() { kill -s "$1" -- "-$pid" 2>/dev/null || kill -s "$1" "$pid" 2>/dev/null; }
for s in TERM INT HUP QUIT USR2 ALRM ABRT PIPE FPE ILL SEGV; do trap "trapped=1; killtree $s" "$s"; done
trap 'trapped=1; killtree KILL' USR1
[ -n "$pending" ] && killtree "$pending"
rc=
while :; do
  trapped=
  wait "$pid"
  r=$?
  if [ "$r" = 127 ] && [ -n "$rc" ]; then break; fi
  rc=$r
  [ -n "$trapped" ] || break
done
trap - TERM INT HUP QUIT USR1 USR2 ALRM ABRT PIPE FPE ILL SEGV
killtree KILL
if [ "$rc" -gt 128 ] && [ "$rc" -lt 160 ]; then
  kill -s "$(kill -l "$rc")" "$shell" 2>/dev/null
fi
exit "$rc"`

// watchdogName is $0 of the watchdog shell, so it is recognisable in ps.
const watchdogName = "hostgate-watchdog"

// watchdogGrace is how long a cancelled ctx waits for the watchdog to end
// the tree before the transport is told to cancel the spawn itself.
const watchdogGrace = 5 * time.Second

// spawnWatched starts argv under the watchdog shell script on a transport
// that does not own supervision. Dir and Env apply to the watchdog, which the
// command inherits.
func spawnWatched(ctx context.Context, t Transport, argv []string, opts SpawnOptions) (Process, error) {
	// The transport's own reaction to ctx (often SIGKILL to the shell) would
	// race the cleaner USR1 path, so the spawn gets a ctx of its own that
	// is cancelled only if the watchdog has not finished within the grace.
	sctx, scancel := context.WithCancel(context.WithoutCancel(ctx))
	full := append([]string{"sh", "-c", watchdogScript, watchdogName}, argv...)
	// Until the process has started there is no watchdog to wait for:
	// the spawn itself (a session's open, which a host that stopped
	// answering never answers) ends with ctx, as an unwatched one does.
	// A process that started as ctx ended is then cancelled by the
	// transport, and its tree ended by the poller, which sees the
	// watchdog go.
	stopSpawn := context.AfterFunc(ctx, scancel)
	p, err := t.Spawn(sctx, full, opts)
	stopSpawn()
	if err != nil {
		scancel()
		if ctx.Err() != nil {
			// The transport saw sctx's cancel: say what ended it.
			return nil, fmt.Errorf("hostgate: spawn: %w (%w)", ctxErr(ctx), err)
		}
		return nil, err
	}
	w := &watchedProcess{Process: p, scancel: scancel, done: make(chan struct{})}
	w.stop = context.AfterFunc(ctx, func() {
		_ = w.Kill(SIGKILL)
		w.mu.Lock()
		defer w.mu.Unlock()
		if !w.finished {
			w.grace = time.AfterFunc(watchdogGrace, scancel)
		}
	})
	go w.wait()
	return w, nil
}

// watchedProcess is a Process under the watchdog. Its wait goroutine owns
// the underlying Wait and releases the ctx watch and the grace timer.
type watchedProcess struct {
	Process
	scancel context.CancelFunc
	stop    func() bool

	mu       sync.Mutex
	grace    *time.Timer
	finished bool

	done chan struct{}
	err  error
}

func (w *watchedProcess) wait() {
	w.err = w.Process.Wait()
	w.stop()
	w.mu.Lock()
	w.finished = true
	if w.grace != nil {
		w.grace.Stop()
	}
	w.mu.Unlock()
	w.scancel()
	close(w.done)
}

// Wait returns once the watchdog, and with it the command's process group,
// has ended.
func (w *watchedProcess) Wait() error {
	<-w.done
	return w.err
}

// Exited is the watchdog's (exitedOf): it exits once the command and
// its group have.
func (w *watchedProcess) Exited() <-chan struct{} { return exitedOf(w.Process) }

// Kill signals the command's whole process group through the watchdog.
func (w *watchedProcess) Kill(sig Signal) error {
	sig, ok := sig.Canonical()
	if !ok {
		return fmt.Errorf("hostgate: kill: unknown signal %q", sig)
	}
	select {
	case <-w.done:
		return nil
	default:
	}
	switch sig {
	case SIGKILL:
		sig = "USR1"
	case "USR1":
		return fmt.Errorf("%w: USR1 carries the watchdog's kill, so it cannot reach a command under it", ErrNotSupported)
	}
	return w.Process.Kill(sig)
}

// Resize passes through to a PTY process.
func (w *watchedProcess) Resize(cols, rows int) error {
	if r, ok := w.Process.(Resizer); ok {
		return r.Resize(cols, rows)
	}
	return fmt.Errorf("%w: resize of a process without a PTY", ErrNotSupported)
}
