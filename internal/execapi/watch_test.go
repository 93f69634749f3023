package execapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/dockerhost"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// TestFrozenAgentReplaced: sandbox code may stop its agent (kill -STOP).
// A command sent to the stopped agent's tunnel waited its whole timeout
// (and the execution was destroyed for it): now one whose channel the
// agent does not open within OpenTimeout is not started (docker exec runs
// it), the agent is pinged, and, silent for PingTimeout, it is killed
// (KillStopped) and a new one attached; a command it was running answers
// that the agent stopped answering, not a bare EOF.
func TestFrozenAgentReplaced(t *testing.T) {
	f := newFixture(t)
	f.pool.freezable = true
	var killMu sync.Mutex
	var killed []string
	// Long enough that a live agent on a loaded -race machine opens
	// its channels within it. PingTimeout is three times it, so that
	// the watch's own pings (every PingTimeout, each waiting as long)
	// cannot find the frozen agent first: the command's refusal is
	// then OpenTimeout's (errNoChannel), which the check below names.
	f.agents.cfg.OpenTimeout = time.Second
	f.agents.cfg.PingTimeout = 3 * time.Second
	f.agents.cfg.KillStopped = func(ctx context.Context, id, name string, pid int) (int, error) {
		killMu.Lock()
		killed = append(killed, fmt.Sprintf("%s %s %d", id, name, pid))
		killMu.Unlock()
		f.pool.killAgent(id)
		return 1, nil
	}
	id := provisioned(t, f)
	f.waitEvent(t, tunnelEvent{id, true})
	r := f.agents.Runner(id)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	run := func(r dockerhost.CommandRunner, stdin io.Reader, script string) (int, string, error) {
		var out budget
		out.n = 1 << 20
		code, err := r.Run(ctx, dockerhost.Command{Argv: []string{"/bin/sh", "-c", script}, Dir: "/", Stdin: stdin, Stdout: &out, Stderr: io.Discard})
		return code, out.String(), err
	}
	if code, out, err := run(r, nil, "echo up"); err != nil || code != 0 || out != "up\n" {
		t.Fatalf("before the freeze: %d %q %v", code, out, err)
	}

	// A command running as the agent freezes.
	started, release := make(chan struct{}, 1), make(chan struct{})
	var releaseOnce sync.Once
	// Its stdin's copy, one of the Run's goroutines the tunnel's end
	// waits for, reads until then.
	releaseStdin := func() { releaseOnce.Do(func() { close(release) }) }
	defer releaseStdin()
	inFlight := make(chan error, 1)
	go func() {
		_, _, err := run(r, blockingReader{started, release}, "cat")
		inFlight <- err
	}()
	<-started
	f.pool.freeze(id)

	t0 := time.Now()
	_, _, err := run(r, nil, "echo frozen")
	if !errors.Is(err, dockerhost.ErrNotStarted) || !errors.As(err, new(errNoChannel)) {
		t.Fatalf("a command for the frozen agent: %v after %v, want ErrNotStarted because its channel did not open within OpenTimeout", err, time.Since(t0))
	}
	if f.agents.Runner(id) != nil {
		t.Error("a runner for a suspect agent: its commands would each wait OpenTimeout")
	}
	select {
	case err := <-inFlight:
		var le *dockerhost.LostError
		if !errors.As(err, &le) || !errors.Is(err, dockerhost.ErrRunnerLost) || !strings.Contains(le.Why, "stopped answering") {
			t.Fatalf("the command the frozen agent ran: %v, want a LostError saying it stopped answering", err)
		}
	case <-time.After(wait):
		t.Fatal("the command the frozen agent ran never ended")
	}
	releaseStdin()
	f.waitEvent(t, tunnelEvent{id, false})
	f.waitEvent(t, tunnelEvent{id, true})
	killMu.Lock()
	// The in-process agent's pid is this test's: KillStopped kills that
	// process, no other of its name.
	if want := fmt.Sprintf("%s agent %d", id, os.Getpid()); len(killed) != 1 || killed[0] != want {
		t.Errorf("KillStopped calls %q, want one for %s's agent by its pid, %q", killed, id, want)
	}
	killMu.Unlock()
	if s := f.agents.Stats(); s.Unresponsive != 1 || s.Restarts != 0 {
		t.Errorf("stats %+v, want one unresponsive agent replaced", s)
	}
	r2 := f.agents.Runner(id)
	if r2 == nil {
		t.Fatal("no runner once the new agent is up")
	}
	if code, out, err := run(r2, nil, "echo back"); err != nil || code != 0 || out != "back\n" {
		t.Fatalf("through the new agent: %d %q %v", code, out, err)
	}
}

// TestSlowAgentKept: an agent that opens a command's channel late but
// answers the ping is slow, not stopped: it is kept, and commands go
// through it again once it answered.
func TestSlowAgentKept(t *testing.T) {
	f := newFixture(t)
	f.agents.cfg.OpenTimeout = time.Nanosecond
	id := provisioned(t, f)
	f.waitEvent(t, tunnelEvent{id, true})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	r := f.agents.Runner(id)
	if _, err := r.Run(ctx, dockerhost.Command{Argv: []string{"true"}, Dir: "/", Stdout: io.Discard, Stderr: io.Discard}); !errors.Is(err, dockerhost.ErrNotStarted) {
		t.Fatalf("a command not opened within 1 ns: %v, want ErrNotStarted", err)
	}
	for f.agents.Runner(id) == nil {
		if ctx.Err() != nil {
			t.Fatal("the agent answered no ping: no runner again")
		}
		time.Sleep(time.Millisecond)
	}
	if s := f.agents.Stats(); s != (AgentStats{}) || f.pool.count(id) != 1 {
		t.Fatalf("stats %+v, attachments %d: want the agent kept", s, f.pool.count(id))
	}
}

// TestSlowAgentNotStoppedKept: an agent that leaves the ping unanswered
// but is not stopped (KillStopped finds none) is slow, not gone: its
// tunnel, and the commands it runs, are kept; new ones go to docker exec
// until it answers.
func TestSlowAgentNotStoppedKept(t *testing.T) {
	f := newFixture(t)
	f.pool.freezable = true
	looked := make(chan struct{}, 16)
	f.agents.cfg.PingTimeout = 200 * time.Millisecond
	f.agents.cfg.KillStopped = func(ctx context.Context, id, name string, pid int) (int, error) {
		looked <- struct{}{}
		return 0, nil
	}
	id := provisioned(t, f)
	f.waitEvent(t, tunnelEvent{id, true})
	f.pool.freeze(id)
	for range 2 {
		select {
		case <-looked:
		case <-time.After(wait):
			t.Fatal("the silent agent was never looked at")
		}
	}
	select {
	case ev := <-f.events:
		t.Fatalf("tunnel event %+v for a slow agent, want its tunnel kept", ev)
	default:
	}
	if f.agents.Runner(id) != nil {
		t.Error("a runner for an agent that answers no ping: its commands would each wait OpenTimeout")
	}
	if s := f.agents.Stats(); s != (AgentStats{}) || f.pool.count(id) != 1 {
		t.Fatalf("stats %+v, attachments %d: want the agent kept", s, f.pool.count(id))
	}
	f.pool.killAgent(id)
}

// TestAgentStoppedBeforeItAnswers: an agent stopped before it answers the
// gateway's first ping (a loop in the sandbox that stops each agent as it
// comes) is found stopped within PingTimeout, killed and replaced, and
// counts against MaxRestarts: the ping waited the tunnel's keepalive
// (a minute in a sandbox), no agent was killed, and the attempt counted
// as a run that had stayed up a minute, so the gateway never gave up.
func TestAgentStoppedBeforeItAnswers(t *testing.T) {
	f := newFixture(t)
	f.pool.freezable = true
	f.pool.frozenFrom = 1
	f.agents.cfg.PingTimeout = 300 * time.Millisecond
	var killed atomic.Int32
	f.agents.cfg.KillStopped = func(ctx context.Context, id, name string, pid int) (int, error) {
		killed.Add(1)
		f.pool.killAgent(id)
		return 1, nil
	}
	t0 := time.Now()
	id := provisioned(t, f) // waits for the agent that answers
	t.Logf("provisioned in %v", time.Since(t0))
	if n := killed.Load(); n != 1 || f.pool.count(id) != 2 {
		t.Fatalf("KillStopped calls %d, attachments %d: want the stopped agent killed and one more attached", n, f.pool.count(id))
	}
	if s := f.agents.Stats(); s.Unresponsive != 1 {
		t.Fatalf("stats %+v, want one agent replaced as unresponsive", s)
	}
}

// TestAgentRetriedAfterGivingUp: after MaxRestarts agents in a row
// failed, the gateway gave up on the execution's agent until it
// restarted: its commands used docker exec, and it was no host, for the
// execution's whole life, even once whatever failed the agents had
// passed. Now it tries one agent after RetryAfter, then after twice as
// long, and an agent that comes up serves again.
func TestAgentRetriedAfterGivingUp(t *testing.T) {
	f := newFixture(t)
	f.agents.cfg.MaxRestarts = 2
	f.agents.cfg.RetryAfter = 50 * time.Millisecond
	var failing atomic.Int32
	f.pool.beforeAttach = func(string) error {
		if failing.Add(-1) >= 0 {
			return errors.New("agent trouble")
		}
		return nil
	}
	id := provisioned(t, f)
	f.waitEvent(t, tunnelEvent{id, true})
	// The next 2 attachments fail (MaxRestarts), then the first retry:
	// two retries, the second comes up.
	failing.Store(3)
	f.pool.killAgent(id)
	f.waitEvent(t, tunnelEvent{id, false})
	f.waitEvent(t, tunnelEvent{id, true})
	if s := f.agents.Stats(); s.GaveUp != 1 || s.Retries != 2 || s.Restarts != 2 {
		t.Errorf("stats %+v, want 2 restarts, a give-up and 2 retries", s)
	}
	r := f.agents.Runner(id)
	if r == nil {
		t.Fatal("no runner once the retried agent is up")
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var out budget
	out.n = 1 << 10
	if code, err := r.Run(ctx, dockerhost.Command{Argv: []string{"/bin/sh", "-c", "echo back"}, Dir: "/", Stdout: &out, Stderr: io.Discard}); err != nil || code != 0 || out.String() != "back\n" {
		t.Fatalf("through the retried agent: %d %q %v", code, out.String(), err)
	}
	if !f.reg.Connected(id) {
		t.Fatal("the execution is no host once its retried agent is up")
	}
}

// TestAgentStoppedBeforeExecAnswered: sandbox code may stop its agent
// after it opened a command's channel and before it answered the exec
// request. The command may have started then, so docker exec must not run
// it again: it answers that the agent stopped answering, within about
// OpenTimeout and PingTimeout.
func TestAgentStoppedBeforeExecAnswered(t *testing.T) {
	f := newFixture(t)
	f.pool.freezable = true
	// Long enough that a live agent on a loaded -race machine opens
	// its channels within it; the frozen one is still told apart well
	// inside the 5 s the check below allows.
	f.agents.cfg.OpenTimeout = time.Second
	f.agents.cfg.PingTimeout = 2 * time.Second
	f.agents.cfg.KillStopped = func(ctx context.Context, id, name string, pid int) (int, error) {
		f.pool.killAgent(id)
		return 1, nil
	}
	id := provisioned(t, f)
	f.waitEvent(t, tunnelEvent{id, true})
	r := f.agents.Runner(id)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if code, err := r.Run(ctx, dockerhost.Command{Argv: []string{"true"}, Dir: "/", Stdout: io.Discard, Stderr: io.Discard}); err != nil || code != 0 {
		t.Fatalf("before the stop: %d %v", code, err)
	}
	testHookChannelOpened = func() { f.pool.freeze(id) }
	defer func() { testHookChannelOpened = nil }()
	t0 := time.Now()
	_, err := r.Run(ctx, dockerhost.Command{Argv: []string{"true"}, Dir: "/", Stdout: io.Discard, Stderr: io.Discard})
	took := time.Since(t0)
	t.Logf("answered in %v: %v", took, err)
	var le *dockerhost.LostError
	if !errors.As(err, &le) || !strings.Contains(le.Why, "stopped answering") || errors.Is(err, dockerhost.ErrNotStarted) {
		t.Fatalf("a command whose agent stopped before it answered the exec request: %v, want a LostError saying it stopped answering (not ErrNotStarted: it may have started)", err)
	}
	// A gateway that never pinged would leave the command to its ctx
	// (30 s), which the check above tells apart by its error; the bound
	// is the promise, with room for a loaded -race machine (it was 1 s
	// over the 3 s).
	if took > f.agents.cfg.OpenTimeout+f.agents.cfg.PingTimeout+10*time.Second {
		t.Errorf("answered after %v, want about OpenTimeout + PingTimeout", took)
	}
	f.waitEvent(t, tunnelEvent{id, true})
}

// TestStoppedAgentWithoutPIDMapped: an agent that reports no pid (an
// older agent, one stopped before it did) is killed by the pid its
// attachment maps (dockerhost.Stdio.PID, where the gateway sees the
// engine's processes): KillStopped was asked with pid 0, which killed every
// stopped process of the agent's name that docker exec started, a decoy
// of sandbox code's among them.
func TestStoppedAgentWithoutPIDMapped(t *testing.T) {
	f := newFixture(t)
	f.pool.freezable = true
	f.pool.olderAgent = true
	f.pool.mapPID = 4242
	f.agents.cfg.PingTimeout = 300 * time.Millisecond
	pids := make(chan int, 16)
	f.agents.cfg.KillStopped = func(ctx context.Context, id, name string, pid int) (int, error) {
		pids <- pid
		f.pool.killAgent(id)
		return 1, nil
	}
	id := provisioned(t, f)
	f.waitEvent(t, tunnelEvent{id, true})
	f.pool.freeze(id)
	f.waitEvent(t, tunnelEvent{id, false})
	f.waitEvent(t, tunnelEvent{id, true})
	if pid := <-pids; pid != 4242 {
		t.Fatalf("KillStopped asked for pid %d, want the mapped 4242", pid)
	}
	if s := f.agents.Stats(); s.Unresponsive != 1 {
		t.Fatalf("stats %+v, want one agent replaced as unresponsive", s)
	}
}

// TestStoppedAgentAmongCandidatesKept: an agent whose pid is unknown (it
// reported none, and its attachment does not map it) and that stopped
// beside another stopped process of its name is not killed, nor the other
// one, and keeps its tunnel: KillStopped refuses to pick
// (dockerhost.StoppedCandidatesError), and the gateway says so once, at
// warn, naming the execution and the candidates. Once only one is stopped
// (the decoy killed or continued) KillStopped kills it, and a new agent is
// attached.
func TestStoppedAgentAmongCandidatesKept(t *testing.T) {
	f := newFixture(t)
	var logs testenv.LogBuffer
	f.agents.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f.pool.freezable = true
	f.pool.olderAgent = true
	f.agents.cfg.PingTimeout = 200 * time.Millisecond
	var refusals atomic.Int32
	refusals.Store(3)
	pids := make(chan int, 16)
	f.agents.cfg.KillStopped = func(ctx context.Context, id, name string, pid int) (int, error) {
		pids <- pid
		if refusals.Add(-1) >= 0 {
			return 0, &dockerhost.StoppedCandidatesError{ExecutionID: id, Name: name, Count: 2, PIDs: []int{31, 47}}
		}
		f.pool.killAgent(id)
		return 1, nil
	}
	id := provisioned(t, f)
	f.waitEvent(t, tunnelEvent{id, true})
	f.pool.freeze(id)
	f.waitEvent(t, tunnelEvent{id, false})
	if n := refusals.Load(); n != -1 {
		t.Fatalf("tunnel down with %d refusals left, want it kept through the 3", n+1)
	}
	f.waitEvent(t, tunnelEvent{id, true})
	for range 4 {
		if pid := <-pids; pid != 0 {
			t.Fatalf("KillStopped asked for pid %d, want 0: the agent reported none, and nothing mapped it", pid)
		}
	}
	if s := f.agents.Stats(); s.Unresponsive != 1 || f.pool.count(id) != 2 {
		t.Fatalf("stats %+v, attachments %d: want the agent kept through the refusals, then replaced", s, f.pool.count(id))
	}
	var warned []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "which stopped process of its name is the agent is unknown") {
			warned = append(warned, l)
		}
	}
	if len(warned) != 3 || !strings.Contains(warned[0], "level=WARN") || !strings.Contains(warned[0], "execution="+id) ||
		!strings.Contains(warned[0], "candidates=\"[31 47]\"") || !strings.Contains(warned[1], "level=DEBUG") {
		t.Fatalf("refusals logged %q, want the first at warn naming the execution and the candidates, the others at debug", warned)
	}
}

// TestAdoptedAgentRetried: after a gateway restart, the agent of an
// adopted execution that failed 1 + MaxRestarts times before its first
// tunnel was given up on for good (Resume answered "agent did not start"
// and nothing tried again): the execution ran its commands by docker exec,
// and was no host, for the rest of its life. Now its loop goes on as after
// a give-up, and an agent tried once the trouble passed comes up.
func TestAdoptedAgentRetried(t *testing.T) {
	f := newFixture(t)
	id := provisioned(t, f)
	f.agents.Stop(id) // the gateway going away; the execution lives on
	f.waitEvent(t, tunnelEvent{id, false})

	restarted := NewAgents(f.pool.attach, func(ctx context.Context, id string) error {
		_, err := f.ex.Get(ctx, id)
		return err
	}, f.st, f.reg, string(ssh.MarshalAuthorizedKey(f.ca.PublicKey())), &AgentsConfig{
		ReadyTimeout: wait, KeyDir: f.agents.cfg.KeyDir, Dir: f.agents.cfg.Dir,
		MaxRestarts: 2, RetryAfter: 50 * time.Millisecond, Certify: f.agents.cfg.Certify,
		OnTunnel: f.agents.cfg.OnTunnel})
	restarted.environPaths = f.agents.environPaths
	defer restarted.Close()
	// 1 + MaxRestarts attempts fail, then the give-up, then the first
	// retry fails too; the second comes up.
	var failing atomic.Int32
	failing.Store(4)
	f.pool.beforeAttach = func(string) error {
		if failing.Add(-1) >= 0 {
			return errors.New("agent trouble")
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	t0 := time.Now()
	if _, err := restarted.Resume(ctx, id); err == nil || !strings.Contains(err.Error(), "tries one again") {
		t.Fatalf("Resume of an agent failing at adoption: %v, want an error saying it is tried again", err)
	}
	t.Logf("Resume answered after %v", time.Since(t0))
	if !restarted.Running(id) {
		t.Fatal("the adopted execution's agent loop ended with Resume's error")
	}
	f.waitEvent(t, tunnelEvent{id, true})
	t.Logf("agent up %v after Resume began", time.Since(t0))
	if s := restarted.Stats(); s.GaveUp != 1 || s.Retries != 2 {
		t.Errorf("stats %+v, want a give-up and 2 retries", s)
	}
	r := restarted.Runner(id)
	if r == nil {
		t.Fatal("no runner once the retried agent is up: commands would use docker exec")
	}
	var out budget
	out.n = 1 << 10
	if code, err := r.Run(ctx, dockerhost.Command{Argv: []string{"/bin/sh", "-c", "echo adopted"}, Dir: "/", Stdout: &out, Stderr: io.Discard}); err != nil || code != 0 || out.String() != "adopted\n" {
		t.Fatalf("through the retried agent: %d %q %v", code, out.String(), err)
	}
	if !f.reg.Connected(id) {
		t.Fatal("the adopted execution is no host once its retried agent is up")
	}
}

// TestStoppedAgentSlowKill: KillStopped's docker exec can report well
// after its kill took (a loaded engine): the killed agent's tunnel ended
// first, and a command it ran waited endedWait for the verdict, then
// answered that the agent ended (did the command kill it?) instead of
// that it stopped answering (e2e TestSandboxAgentStoppedRepeatedly, once
// in CI).
func TestStoppedAgentSlowKill(t *testing.T) {
	f := newFixture(t)
	f.pool.freezable = true
	f.agents.cfg.OpenTimeout = time.Second
	f.agents.cfg.PingTimeout = time.Second
	f.agents.cfg.KillStopped = func(ctx context.Context, id, name string, pid int) (int, error) {
		f.pool.killAgent(id)
		select {
		case <-time.After(endedWait + time.Second):
		case <-ctx.Done():
		}
		return 1, nil
	}
	id := provisioned(t, f)
	f.waitEvent(t, tunnelEvent{id, true})
	r := f.agents.Runner(id)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	testHookChannelOpened = func() { f.pool.freeze(id) }
	defer func() { testHookChannelOpened = nil }()
	_, err := r.Run(ctx, dockerhost.Command{Argv: []string{"true"}, Dir: "/", Stdout: io.Discard, Stderr: io.Discard})
	var le *dockerhost.LostError
	if !errors.As(err, &le) || !strings.Contains(le.Why, "stopped answering") {
		t.Fatalf("a command whose stopped agent was killed before KillStopped reported: %v, want a LostError saying it stopped answering", err)
	}
	f.waitEvent(t, tunnelEvent{id, true})
}
