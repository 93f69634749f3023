package agent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/sshlayer"
)

// GuardArg, as the agent binary's first argument, makes it a guard (see
// StartGuard) instead of an agent. It is not a user command.
const GuardArg = "__hostgate_guard"

// guardCapable is set by MaybeRunGuard: only a binary that would act as a
// guard when re-run with GuardArg may be started as one. Any other binary
// calling RunServe or RunConnect (a test binary would rerun its suite)
// serves without a guard.
var guardCapable atomic.Bool

// MaybeRunGuard runs the guard and exits when the process was started as
// one (os.Args[1] == GuardArg); otherwise it returns at once, noting that
// this binary can be its own guard. The agent's main and test binaries
// that run RunServe or RunConnect in process call it first thing.
func MaybeRunGuard() {
	if len(os.Args) < 2 || os.Args[1] != GuardArg {
		guardCapable.Store(true)
		return
	}
	// The agent's own signals (Ctrl-C in its terminal, a stop) are the
	// agent's to handle; the guard's only cue is its pipe closing.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	if err := RunGuard(os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "agent guard: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// RunGuard reads "+PGID" and "-PGID" lines, and "+DIR" and "-DIR" lines
// of forwarded agents' socket directories (absolute paths), from r until
// EOF, then sends SIGKILL to every group added and not removed, and to
// every process of a session such a group leads (a terminal's background
// jobs), and removes every directory added and not removed. The agent
// holds the other end: its exit, whatever the cause (SIGKILL, OOM kill, a
// crash), closes the pipe. A clean stop removes every group and directory
// first, so nothing is killed or removed.
func RunGuard(r io.Reader) error {
	live := make(map[int]bool)
	dirs := make(map[string]bool)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, maxGuardLine), maxGuardLine)
	var bad error
	for sc.Scan() {
		line := sc.Text()
		if len(line) > 1 && line[1] == '/' {
			dir, made, err := parseGuardDir(line)
			if err != nil {
				bad = err
				break
			}
			if made {
				dirs[dir] = true
			} else {
				delete(dirs, dir)
			}
			continue
		}
		pgid, err := parseGuardLine(line)
		if err != nil {
			bad = err
			break
		}
		if pgid > 0 {
			live[pgid] = true
		} else {
			delete(live, -pgid)
		}
	}
	for pgid := range live {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	killSessions(live)
	// After the kills: nothing of the sessions uses the sockets now.
	for dir := range dirs {
		_ = os.RemoveAll(dir)
	}
	if bad == nil {
		bad = sc.Err()
	}
	return bad
}

// parseGuardLine parses "+N" (N returned) or "-N" (-N returned), N > 1.
func parseGuardLine(line string) (int, error) {
	if len(line) < 2 || (line[0] != '+' && line[0] != '-') {
		return 0, fmt.Errorf("bad line %q", line)
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n <= 1 || line[1] == '+' || line[1] == '-' {
		// Group 0 is the caller's own, 1 would be init's, -1 everything.
		return 0, fmt.Errorf("bad process group in %q", line)
	}
	if line[0] == '-' {
		n = -n
	}
	return n, nil
}

// maxGuardLine bounds a guard line: a sign and a path up to PATH_MAX.
const maxGuardLine = 1 + 4096 + 1

// parseGuardDir parses "+DIR" or "-DIR" (made true for +). DIR must be a
// clean absolute path whose last element is a forwarded agent's
// directory (ssh-…): the guard removes it whole, so a wrong line must not
// name anything else.
func parseGuardDir(line string) (dir string, made bool, err error) {
	if len(line) < 2 || (line[0] != '+' && line[0] != '-') {
		return "", false, fmt.Errorf("bad line %q", line)
	}
	dir = line[1:]
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || !strings.HasPrefix(filepath.Base(dir), "ssh-") {
		return "", false, fmt.Errorf("bad agent socket directory in %q", line)
	}
	return dir, line[0] == '+', nil
}

// guardWriteTimeout bounds a write to a guard that stopped reading.
const guardWriteTimeout = time.Second

// Guard is the agent's side of its guard process: a child that outlives a
// killed agent just long enough to kill the commands the agent started.
// Each command runs in its own process group, which the SSH server kills
// itself on every orderly path; only an agent that dies without running
// its cleanup (SIGKILL, the OOM killer) left them behind.
type Guard struct {
	mu  sync.Mutex
	w   *os.File // nil once closed or broken
	cmd *exec.Cmd
}

// StartGuard starts exe (the agent binary) as a guard.
func StartGuard(exe string) (*Guard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("agent: guard pipe: %w", err)
	}
	cmd := exec.Command(exe, GuardArg)
	cmd.Stdin = r
	cmd.Stderr = os.Stderr
	// Its own process group: killing the agent's group (a terminal's
	// Ctrl-\, `kill -9 -PGID`) must leave the guard to do its job.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	_ = r.Close()
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("agent: start guard: %w", err)
	}
	return &Guard{w: w, cmd: cmd}, nil
}

// Track tells the guard about a process group; it is
// sshlayer.ServerConfig.ProcessGroups. A guard that is gone is ignored:
// the agent keeps serving.
func (g *Guard) Track(pgid int, running bool) {
	sign := byte('-')
	if running {
		sign = '+'
	}
	line := append([]byte{sign}, strconv.Itoa(pgid)...)
	g.write(append(line, '\n'))
}

// write sends line to the guard; a guard that is gone is ignored.
func (g *Guard) write(line []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w == nil {
		return
	}
	// A guard that stopped reading must not stall the server.
	_ = g.w.SetWriteDeadline(time.Now().Add(guardWriteTimeout))
	if _, err := g.w.Write(line); err != nil {
		_ = g.w.Close()
		g.w = nil
	}
}

// TrackDir tells the guard about a forwarded agent's socket directory; it
// is sshlayer.ServerConfig.AgentSockets. One the guard would refuse (see
// parseGuardDir), or too long for its line, is not sent.
func (g *Guard) TrackDir(dir string, made bool) {
	sign := "-"
	if made {
		sign = "+"
	}
	line := sign + dir
	if _, _, err := parseGuardDir(line); err != nil || len(line)+1 > maxGuardLine {
		return
	}
	g.write([]byte(line + "\n"))
}

// Configure sets the server config's ProcessGroups to g.Track and its
// AgentSockets to g.TrackDir.
func (g *Guard) Configure(sc *sshlayer.ServerConfig) {
	sc.ProcessGroups = g.Track
	sc.AgentSockets = g.TrackDir
}

// Close ends the guard: it kills any group still tracked (none after the
// server closed cleanly) and exits; Close waits for it.
func (g *Guard) Close() error {
	g.mu.Lock()
	if g.w != nil {
		_ = g.w.Close()
		g.w = nil
	}
	g.mu.Unlock()
	err := g.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("agent: guard: %w", err)
	}
	return err
}

// startGuard starts this binary as the agent's guard. The guard is a
// backstop: without one (a binary that never called MaybeRunGuard, no
// executable path, fork refused) the agent serves anyway, and says so.
func startGuard(log *slog.Logger) *Guard {
	err := errors.New("this binary does not call agent.MaybeRunGuard")
	if guardCapable.Load() {
		var exe string
		if exe, err = os.Executable(); err == nil {
			var g *Guard
			if g, err = StartGuard(exe); err == nil {
				return g
			}
		}
	}
	log.Warn("no guard process: commands will outlive the agent if it is killed with SIGKILL", "err", err)
	return nil
}
