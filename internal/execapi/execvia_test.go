package execapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/dockerhost"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// fixtureEnviron stands in for a container's /proc/1/environ.
const fixtureEnviron = "PATH=/usr/local/bin:/usr/bin:/bin\x00HOSTNAME=box\x00HOME=/nonexistent\x00FOO=bar\x00"

// budget is a stand-in for dockerhost's shared output budget: safe for
// concurrent writes, failing with errOverBudget once n bytes are spent.
type budget struct {
	mu  sync.Mutex
	n   int
	out strings.Builder
}

var errOverBudget = errors.New("over budget")

func (b *budget) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(p) > b.n {
		b.out.Write(p[:b.n])
		n := b.n
		b.n = 0
		return n, errOverBudget
	}
	b.n -= len(p)
	b.out.Write(p)
	return len(p), nil
}

func (b *budget) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.String()
}

func provisioned(t *testing.T, f *fixture) string {
	t.Helper()
	status, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	if status != http.StatusCreated {
		t.Fatalf("provision: %d %v", status, body)
	}
	return body["executionId"].(string)
}

// provisionedRunner provisions an execution on a new fixture and returns
// its tunnel's runner, with a context that ends with the test.
func provisionedRunner(t *testing.T) (dockerhost.CommandRunner, context.Context) {
	t.Helper()
	f := newFixture(t)
	r := f.agents.Runner(provisioned(t, f))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return r, ctx
}

// TestRunnerThroughTunnel runs commands through an execution's tunnel to
// the real agent (in-process, commands on this machine): the environment
// is exactly the container's plus the command's, cwd, stdin, exit codes,
// signals as 128+N, concurrent commands on the one connection, the output
// budget and ctx ending the command promptly, and no runner once the
// agent is stopped.
func TestRunnerThroughTunnel(t *testing.T) {
	envBin, err := exec.LookPath("env")
	testenv.RequirePeer(t, "an env binary", err == nil)
	f := newFixture(t)
	id := provisioned(t, f)
	r := f.agents.Runner(id)
	if r == nil {
		t.Fatal("no runner for a live tunnel")
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	run := func(ctx context.Context, argv []string, env map[string]string, dir, stdin string) (int, string, string, error) {
		var out, errOut budget
		out.n, errOut.n = 1<<20, 1<<20
		c := dockerhost.Command{Argv: argv, Env: env, Dir: dir, Stdout: &out, Stderr: &errOut}
		if stdin != "" {
			c.Stdin = strings.NewReader(stdin)
		}
		code, err := r.Run(ctx, c)
		return code, out.String(), errOut.String(), err
	}

	dir := t.TempDir()
	code, out, _, err := run(ctx, []string{envBin, "-0"}, map[string]string{"FOO": "baz", "NEW": "1"}, dir, "")
	got, perr := parseEnviron([]byte(out))
	want := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOSTNAME=box", "HOME=/nonexistent", "FOO=baz", "NEW=1"}
	slices.Sort(got)
	slices.Sort(want)
	if err != nil || perr != nil || code != 0 || !slices.Equal(got, want) {
		t.Fatalf("env: %d %q %v %v; want %q", code, got, err, perr, want)
	}
	for _, tc := range []struct {
		script, stdin  string
		code           int
		stdout, stderr string
	}{
		{`pwd; cat; echo e >&2; exit 3`, "in\n", 3, dir + "\nin\n", "e\n"},
		{`kill -TERM $$`, "", 143, "", ""},
		{`kill -KILL $$`, "", 137, "", ""},
		{`exec cat`, "", 0, "", ""},                                                              // no stdin: EOF at once
		{`head -c 1 >/dev/null; echo read one`, strings.Repeat("x", 4<<20), 0, "read one\n", ""}, // unread stdin is not an error
	} {
		code, out, errOut, err := run(ctx, []string{"/bin/sh", "-c", tc.script}, nil, dir, tc.stdin)
		if err != nil || code != tc.code || out != tc.stdout || errOut != tc.stderr {
			t.Errorf("%q: %d %q %q %v; want %d %q %q", tc.script, code, out, errOut, err, tc.code, tc.stdout, tc.stderr)
		}
	}

	// Concurrent commands share the connection.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, out, _, err := run(ctx, []string{"echo", fmt.Sprint(i)}, nil, "/", "")
			if err != nil || code != 0 || out != fmt.Sprintf("%d\n", i) {
				t.Errorf("concurrent %d: %d %q %v", i, code, out, err)
			}
		}()
	}
	wg.Wait()

	// The output budget ends a command that would never stop.
	var out2 budget
	out2.n = 1000
	code, err = r.Run(ctx, dockerhost.Command{Argv: []string{"yes"}, Dir: "/", Stdout: &out2, Stderr: io.Discard})
	if !errors.Is(err, errOverBudget) || len(out2.String()) != 1000 {
		t.Fatalf("over budget: %d %v, %d bytes", code, err, len(out2.String()))
	}
	// So does ctx (the caller leaving, the timeout).
	cctx, ccancel := context.WithCancelCause(ctx)
	stop := errors.New("caller left")
	time.AfterFunc(100*time.Millisecond, func() { ccancel(stop) })
	if _, _, _, err := run(cctx, []string{"sleep", "30"}, nil, "/", ""); !errors.Is(err, stop) {
		t.Fatalf("ctx ended: %v, want its cause", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run did not return promptly")
	}

	// Stopped agent: no runner, and a runner taken before cannot start.
	f.agents.Stop(id)
	if f.agents.Runner(id) != nil {
		t.Fatal("a runner without a tunnel")
	}
	if _, _, _, err := run(ctx, []string{"true"}, nil, "/", ""); !errors.Is(err, dockerhost.ErrNotStarted) {
		t.Fatalf("run after the tunnel ended: %v, want ErrNotStarted", err)
	}
}

// TestRunnerRefusesUnexportableEnvironment: a container environment with
// a name no shell can export cannot be reproduced (nor one that cannot be
// read), so the runner does not start commands there (docker exec runs
// them).
func TestRunnerRefusesUnexportableEnvironment(t *testing.T) {
	f := newFixture(t)
	if err := os.WriteFile(f.agents.environPaths[0], []byte("PATH=/bin\x00odd-name=1\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantNoEnviron(t, f, provisioned(t, f))

	f = newFixture(t)
	f.agents.environPaths = []string{"/nonexistent/environ", "/nonexistent/copy"}
	id := provisioned(t, f)
	for range 2 { // the second refuses without a dial
		wantNoEnviron(t, f, id)
	}
}

// wantNoEnviron runs a command on execution id and wants it refused for
// its environment, so that docker exec runs it instead.
func wantNoEnviron(t *testing.T, f *fixture, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := f.agents.Runner(id).Run(ctx, dockerhost.Command{Argv: []string{"true"}, Dir: "/", Stdout: io.Discard, Stderr: io.Discard})
	if !errors.Is(err, dockerhost.ErrNotStarted) || !errors.Is(err, errNoEnviron) {
		t.Fatalf("run: %v, want ErrNotStarted for the environment", err)
	}
}

// TestRunnerReadsTheDeadlinesEnvironCopy: where PID 1's environ cannot
// be read (PID 1 is dockerhost's non-dumpable deadline tool), the copy
// the deadline wrote counts: commands still run through the tunnel with
// the container's environment.
func TestRunnerReadsTheDeadlinesEnvironCopy(t *testing.T) {
	envBin, err := exec.LookPath("env")
	testenv.RequirePeer(t, "an env binary", err == nil)
	f := newFixture(t)
	dir := t.TempDir()
	f.agents.environPaths = []string{filepath.Join(dir, "missing"), f.agents.environPaths[0]}
	// The copy's layout's directory is not there: the copy counts.
	f.agents.environForged = forgedCopy{f.agents.environPaths[1], filepath.Join(dir, "run-hostgate")}
	id := provisioned(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var out budget
	out.n = 1 << 20
	code, err := f.agents.Runner(id).Run(ctx, dockerhost.Command{Argv: []string{envBin, "-0"}, Dir: dir, Stdout: &out, Stderr: io.Discard})
	got, perr := parseEnviron([]byte(out.String()))
	if err != nil || perr != nil || code != 0 || !slices.Contains(got, "HOSTNAME=box") {
		t.Fatalf("env: %d %q %v %v; want the copy's environment", code, got, err, perr)
	}
}

// TestRunnerDistrustsTheOldCopyBesideTheNewDirectory: in a container
// whose PID 1 has its own directory (deadline.InitDir), an environment
// copy where older containers kept theirs (/dev/shm, which sandbox code
// may write) is not read when PID 1's own is missing: commands go to
// docker exec rather than start with an environment sandbox code chose.
func TestRunnerDistrustsTheOldCopyBesideTheNewDirectory(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	initDir := filepath.Join(dir, "run-hostgate")
	if err := os.Mkdir(initDir, 0o755); err != nil {
		t.Fatal(err)
	}
	forged := filepath.Join(dir, "shm-environ")
	if err := os.WriteFile(forged, []byte("PATH=/forged\x00LD_PRELOAD=/forged.so\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.agents.environPaths = []string{filepath.Join(dir, "missing"), filepath.Join(initDir, "environ"), forged}
	f.agents.environForged = forgedCopy{forged, initDir}
	wantNoEnviron(t, f, provisioned(t, f))
}

// TestRunnerOff: without Certify there is no runner.
func TestRunnerOff(t *testing.T) {
	a := NewAgents(nil, nil, nil, nil, "", nil)
	defer a.Close()
	if a.Runner("x") != nil {
		t.Fatal("a runner without Certify")
	}
}

// blockingReader blocks reads until release is closed, then reports EOF.
type blockingReader struct {
	started chan<- struct{}
	release <-chan struct{}
}

func (b blockingReader) Read([]byte) (int, error) {
	b.started <- struct{}{}
	<-b.release
	return 0, io.EOF
}

// TestRunnerBoundsConcurrentCommands: at most maxTunnelCommands commands
// run through one tunnel at once (the agent would refuse the next
// session); one more does not start there, so docker exec runs it.
func TestRunnerBoundsConcurrentCommands(t *testing.T) {
	r, ctx := provisionedRunner(t)
	started, release := make(chan struct{}, maxTunnelCommands), make(chan struct{})
	var wg sync.WaitGroup
	for range maxTunnelCommands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, err := r.Run(ctx, dockerhost.Command{Argv: []string{"cat"}, Dir: "/", Stdin: blockingReader{started, release},
				Stdout: io.Discard, Stderr: io.Discard})
			if err != nil || code != 0 {
				t.Errorf("command: %d %v", code, err)
			}
		}()
	}
	for range maxTunnelCommands {
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("the commands did not start")
		}
	}
	_, err := r.Run(ctx, dockerhost.Command{Argv: []string{"true"}, Dir: "/", Stdout: io.Discard, Stderr: io.Discard})
	if !errors.Is(err, dockerhost.ErrNotStarted) || !errors.Is(err, errTunnelBusy) {
		t.Errorf("one command over the bound: %v, want ErrNotStarted", err)
	}
	close(release)
	wg.Wait()
	if code, err := r.Run(ctx, dockerhost.Command{Argv: []string{"true"}, Dir: "/", Stdout: io.Discard, Stderr: io.Discard}); err != nil || code != 0 {
		t.Fatalf("after the others ended: %d %v", code, err)
	}
}

// TestRunnerRefusedStartAnswers126: a command the agent refuses to start
// (it cannot start the shell; in a sandbox, because its pids limit or
// memory is spent) gets docker exec's answer for a command that cannot
// start, exit 126 with the reason on stdout, at once. It is not handed to
// docker exec, which fails there too after the engine's slow start.
func TestRunnerRefusedStartAnswers126(t *testing.T) {
	f := newFixture(t)
	id := provisioned(t, f)
	r := f.agents.Runner(id)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var out budget
	out.n = 1 << 20
	if code, err := r.Run(ctx, dockerhost.Command{Argv: []string{"true"}, Dir: "/", Stdout: &out, Stderr: io.Discard}); err != nil || code != 0 {
		t.Fatalf("a command before: %d %v", code, err)
	}
	// An argument with a NUL, which no execve takes: the agent's start of
	// the command fails (EINVAL), and it refuses the exec request.
	code, err := r.Run(ctx, dockerhost.Command{Argv: []string{"true", "a\x00b"}, Dir: "/", Stdout: &out, Stderr: io.Discard})
	if err != nil || code != 126 || out.String() != refusedMessage {
		t.Fatalf("a refused command: %d %q %v, want 126 and %q", code, out.String(), err, refusedMessage)
	}
	if !strings.Contains(out.String(), "pids limit") {
		t.Errorf("the message %q does not name the likely cause", out.String())
	}
}

// TestRunnerLongArgvGoesToDockerExec: a command whose script would be one
// execve argument over Linux's 128 KiB is not started by the agent's
// shell, which cannot take it, so docker exec runs it with its argv word
// by word. It used to be answered 126 as if the pids limit were spent.
func TestRunnerLongArgvGoesToDockerExec(t *testing.T) {
	r, ctx := provisionedRunner(t)
	argv := []string{"sh", "-c", "echo $#"}
	for range 200 {
		argv = append(argv, strings.Repeat("y", 1000))
	}
	var out budget
	out.n = 1 << 20
	code, err := r.Run(ctx, dockerhost.Command{Argv: argv, Dir: "/", Stdout: &out, Stderr: io.Discard})
	if !errors.Is(err, dockerhost.ErrNotStarted) || !errors.Is(err, errScriptTooLong) {
		t.Fatalf("200 arguments of 1000 bytes: %d %q %v, want ErrNotStarted for docker exec", code, out.String(), err)
	}
	// Just under the bound, the agent runs it.
	argv = []string{"sh", "-c", "echo ${#0}", strings.Repeat("y", 100<<10)}
	out = budget{n: 1 << 20}
	if code, err := r.Run(ctx, dockerhost.Command{Argv: argv, Dir: "/", Stdout: &out, Stderr: io.Discard}); err != nil || code != 0 || out.String() != "102400\n" {
		t.Fatalf("one argument of 100 KiB: %d %q %v", code, out.String(), err)
	}
}

// TestShutdownWhileReadingEnvironmentIsQuiet: a tunnel that ends while
// the gateway reads the container's environment (the gateway stopping)
// fails the dial; it does not warn that the environment cannot be
// reproduced, as it did at a loaded machine's shutdown
// (TestShutdownClosesTunnelsQuietly failed on it).
func TestShutdownWhileReadingEnvironmentIsQuiet(t *testing.T) {
	f := newFixture(t)
	var logs testenv.LogBuffer
	f.agents.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// The read of the environment waits until the gateway has shut down
	// and the connection with it, then reads over the dead connection, as
	// a read in flight at the shutdown fails. (A FIFO held the agent's
	// open until the agent's SFTP server stopped waiting for a FIFO's
	// other end, pkg/sftp change 25; as TestConnectCutByTheExecutionsEnd-
	// WarnsNothing.)
	reached := make(chan struct{})
	var once sync.Once
	f.agents.readEnviron = func(c *ssh.Client, paths []string, forged forgedCopy) ([]string, error) {
		once.Do(func() { close(reached) })
		_ = c.Wait()
		return readEnviron(c, paths, forged)
	}
	_, body := f.do(t, "POST", "/v1/executions", "admin", provisionBody())
	id := body["executionId"].(string)
	f.waitEvent(t, tunnelEvent{id, true})
	select {
	case <-reached:
	case <-time.After(wait):
		t.Fatal("the gateway never read the container's environment")
	}
	f.reg.Close()
	f.waitEvent(t, tunnelEvent{id, false})
	f.agents.Stop(id)
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("the shutdown during the environment's read warned:\n%s", logs.String())
	}
}
