//go:build unix

package hostgate_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/localexec"
	"github.com/hostgate/hostgate/internal/testenv"
)

// treeScript forks two grandchildren and prints their pids, then waits.
const treeScript = `sleep 300 & echo $!; sleep 300 & echo $!; echo ready; wait`

func localHost(t *testing.T, persistent bool) (*hostgate.Host, *localexec.Transport) {
	t.Helper()
	tr := &localexec.Transport{}
	h := hostgate.New(hostgate.Info{Kind: "local", Persistent: persistent}, func(ctx context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{Transport: tr, Close: func() error { return nil }}, nil
	})
	t.Cleanup(func() { _ = h.Close() })
	return h, tr
}

// startTree spawns treeScript and returns the process, the grandchild pids
// and a reader for the rest of stdout.
func startTree(t *testing.T, ctx context.Context, h *hostgate.Host) (hostgate.Process, []int) {
	t.Helper()
	p, err := h.Spawn(ctx, []string{"sh", "-c", treeScript}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	br := bufio.NewReader(p.Stdout())
	var pids []int
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading pids: %v", err)
		}
		line = strings.TrimSpace(line)
		if line == "ready" {
			break
		}
		pid, err := strconv.Atoi(line)
		if err != nil {
			t.Fatalf("pid line %q", line)
		}
		pids = append(pids, pid)
	}
	go func() { _, _ = io.Copy(io.Discard, br) }()
	return p, pids
}

// waitTimeout waits for p; a watchdog that fails leaves the grandchildren
// holding stdout, so Wait would block: fail instead of hanging.
func waitTimeout(t *testing.T, p hostgate.Process) error {
	t.Helper()
	ch := make(chan error, 1)
	go func() { ch <- p.Wait() }()
	select {
	case err := <-ch:
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("process tree still running 60 s after it should have ended")
		return nil
	}
}

// assertGone checks that every pid has ended. The output pipes close in the
// kernel's exit path before the process turns zombie, so a process seen
// through Wait may still be finishing its exit: give it a bounded moment.
func assertGone(t *testing.T, pids []int) {
	t.Helper()
	if len(pids) != 2 {
		t.Fatalf("got %d grandchild pids", len(pids))
	}
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for _, pid := range pids {
		for testenv.Alive(pid) && time.Now().Before(deadline) {
			<-tick.C
		}
		if testenv.Alive(pid) {
			t.Errorf("grandchild %d still running", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func TestWatchdogKillEndsTree(t *testing.T) {
	h, _ := localHost(t, true)
	p, pids := startTree(t, context.Background(), h)
	for _, pid := range pids {
		if !testenv.Alive(pid) {
			t.Fatalf("grandchild %d not running before kill", pid)
		}
	}
	if err := p.Kill(hostgate.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := waitTimeout(t, p)
	var ee *hostgate.ExitError
	if !errors.As(err, &ee) || ee.Signal != hostgate.SIGKILL {
		t.Errorf("Wait = %v, want killed by KILL", err)
	}
	assertGone(t, pids)
}

func TestWatchdogTermForwarded(t *testing.T) {
	h, _ := localHost(t, true)
	p, pids := startTree(t, context.Background(), h)
	if err := p.Kill(hostgate.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := waitTimeout(t, p)
	var ee *hostgate.ExitError
	if !errors.As(err, &ee) || ee.Signal != hostgate.SIGTERM {
		t.Errorf("Wait = %v, want killed by TERM", err)
	}
	assertGone(t, pids)
}

// Every signal but KILL and USR1 reaches the command as itself, which may
// trap it; ABRT, PIPE and the like killed the watchdog, and with it the
// whole tree. USR1, the watchdog's own kill, is refused.
func TestWatchdogSignalsReachCommand(t *testing.T) {
	h, _ := localHost(t, true)
	for sig, num := range map[hostgate.Signal]syscall.Signal{"ABRT": syscall.SIGABRT, "PIPE": syscall.SIGPIPE, "USR2": syscall.SIGUSR2, "HUP": syscall.SIGHUP} {
		if signal.Ignored(num) {
			// Ignored here, so ignored by the command, whose trap is
			// then a no-op (the agent resets these: internal/sigreset).
			t.Logf("%s is ignored by this test process; not tried", sig)
			continue
		}
		p, err := h.Spawn(context.Background(), []string{"sh", "-c", "trap 'echo caught; exit 7' " + string(sig) + "; echo ready; while :; do sleep 0.05; done"}, hostgate.SpawnOptions{})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }() // the shell reports a child's ABRT there
		out := bufio.NewReader(p.Stdout())
		if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
			t.Fatalf("%s: %q %v", sig, line, err)
		}
		if err := p.Kill(sig); err != nil {
			t.Fatal(err)
		}
		line, _ := out.ReadString('\n')
		go func() { _, _ = io.Copy(io.Discard, out) }()
		err = waitTimeout(t, p)
		var ee *hostgate.ExitError
		if line != "caught\n" || !errors.As(err, &ee) || ee.Code != 7 {
			t.Errorf("Kill(%s): output %q, Wait %v; want the command's trap to run (exit 7)", sig, line, err)
		}
	}
	p, pids := startTree(t, context.Background(), h)
	if err := p.Kill("USR1"); !errors.Is(err, hostgate.ErrNotSupported) {
		t.Errorf("Kill(USR1) under the watchdog: %v, want ErrNotSupported", err)
	}
	_ = p.Kill(hostgate.SIGKILL)
	_ = waitTimeout(t, p)
	assertGone(t, pids)
}

func TestWatchdogCtxCancelEndsTree(t *testing.T) {
	h, _ := localHost(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, pids := startTree(t, ctx, h)
	cancel()
	if err := waitTimeout(t, p); err == nil {
		t.Errorf("Wait after cancel = nil, want an error")
	}
	assertGone(t, pids)
}

// TestWatchdogConnectionLossEndsTree kills the transport-level process (the
// watchdog shell) from outside with SIGKILL, as a dropped connection whose
// remote end is torn down would: the watcher must notice and end the tree.
func TestWatchdogConnectionLossEndsTree(t *testing.T) {
	h, tr := localHost(t, true)
	p, pids := startTree(t, context.Background(), h)
	direct := tr.Pids()
	if len(direct) != 1 {
		t.Fatalf("transport runs %d processes, want 1", len(direct))
	}
	if err := syscall.Kill(direct[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = waitTimeout(t, p)
	assertGone(t, pids)
}

// TestWithoutWatchdogTreeSurvives is the control: on a non-persistent host
// the same kill leaves the grandchildren running, so the tests above
// measure the watchdog and not the transport.
func TestWithoutWatchdogTreeSurvives(t *testing.T) {
	h, _ := localHost(t, false)
	p, pids := startTree(t, context.Background(), h)
	if err := p.Kill(hostgate.SIGKILL); err != nil {
		t.Fatal(err)
	}
	survivors := 0
	for _, pid := range pids {
		if testenv.Alive(pid) {
			survivors++
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = waitTimeout(t, p)
	if survivors != len(pids) {
		t.Errorf("%d of %d grandchildren survived without a watchdog; want all", survivors, len(pids))
	}
}

func TestWatchdogTransparent(t *testing.T) {
	h, _ := localHost(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := h.Exec(ctx, []string{"sh", "-c", `cat; echo "$X" >&2; pwd; exit 3`}, hostgate.ExecOptions{
		SpawnOptions: hostgate.SpawnOptions{Dir: "/", Env: map[string]string{"X": "it's x"}},
		Stdin:        strings.NewReader("from stdin\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout); got != "from stdin\n/\n" {
		t.Errorf("stdout %q", got)
	}
	if got := string(res.Stderr); got != "it's x\n" {
		t.Errorf("stderr %q", got)
	}
	if res.ExitCode != 3 {
		t.Errorf("exit code %d, want 3", res.ExitCode)
	}
	// Arguments that look like options or hold quotes reach the command.
	res, err = h.Exec(ctx, []string{"printf", "%s|", "-n", "a b", `'"`, ""}, hostgate.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout); got != `-n|a b|'"||` {
		t.Errorf("argv round trip %q", got)
	}
}

// TestWatchdogNormalExitReapsLeftovers: a command that exits leaving a
// background child behind takes it along; Wait returns.
func TestWatchdogNormalExitReapsLeftovers(t *testing.T) {
	h, _ := localHost(t, true)
	p, err := h.Spawn(context.Background(), []string{"sh", "-c", `sleep 300 & echo $!`}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, p.Stderr()) }()
	out, _ := io.ReadAll(p.Stdout())
	if err := waitTimeout(t, p); err != nil {
		t.Errorf("Wait = %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("output %q", out)
	}
	assertGone(t, []int{pid, pid})
}

// shellHost returns a persistent host whose processes see only the tools
// linked into a private PATH (name → target). The watchdog then runs on
// that sh, with setsid only if linked.
func shellHost(t *testing.T, links map[string]string) (*hostgate.Host, *localexec.Transport) {
	t.Helper()
	dir := t.TempDir()
	for name, target := range links {
		if _, err := os.Stat(target); err != nil {
			t.Skipf("%s not installed: %v", target, err)
		}
		if err := os.Symlink(target, dir+"/"+name); err != nil {
			t.Fatal(err)
		}
	}
	base, tr := localHost(t, true)
	w := hostgate.Wrap(base, func(argv []string, _ string, env map[string]string) ([]string, map[string]string) {
		if argv[0] == "sh" {
			argv[0] = dir + "/sh"
		}
		env["PATH"] = dir
		return argv, env
	})
	t.Cleanup(func() { _ = w.Close() })
	return w, tr
}

// TestWatchdogShells runs the watchdog on busybox (sh, setsid and sleep
// applets) and on bash without setsid, where only `set -m` job control can
// give the command its own process group. A shell that took neither path
// would leave the grandchildren running and fail these tests.
func TestWatchdogShells(t *testing.T) {
	const bb = "/usr/bin/busybox"
	for _, c := range []struct {
		name  string
		links map[string]string
	}{
		{"busybox", map[string]string{"sh": bb, "setsid": bb, "sleep": bb}},
		{"bash-set-m", map[string]string{"sh": "/bin/bash", "sleep": "/bin/sleep", "cat": "/bin/cat"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Run("kill", func(t *testing.T) {
				h, _ := shellHost(t, c.links)
				p, pids := startTree(t, context.Background(), h)
				if err := p.Kill(hostgate.SIGKILL); err != nil {
					t.Fatal(err)
				}
				err := waitTimeout(t, p)
				var ee *hostgate.ExitError
				if !errors.As(err, &ee) || ee.Signal != hostgate.SIGKILL {
					t.Errorf("Wait = %v, want killed by KILL", err)
				}
				assertGone(t, pids)
			})
			t.Run("connection-loss", func(t *testing.T) {
				h, tr := shellHost(t, c.links)
				p, pids := startTree(t, context.Background(), h)
				direct := tr.Pids()
				if len(direct) != 1 {
					t.Fatalf("transport runs %d processes", len(direct))
				}
				if err := syscall.Kill(direct[0], syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				_ = waitTimeout(t, p)
				assertGone(t, pids)
			})
			t.Run("exit-code", func(t *testing.T) {
				h, _ := shellHost(t, c.links)
				res, err := h.Exec(context.Background(), []string{"sh", "-c", "cat; exit 5"}, hostgate.ExecOptions{Stdin: strings.NewReader("in")})
				if err != nil || res.ExitCode != 5 || string(res.Stdout) != "in" || len(res.Stderr) != 0 {
					t.Errorf("exec: %+v, %v", res, err)
				}
			})
			// A program named "-l" is looked up (127), not taken for
			// exec's option: busybox answered 2 "illegal option -l", bash
			// 0 having run nothing, and a program "--" ran echo.
			t.Run("program-named-dash", func(t *testing.T) {
				h, _ := shellHost(t, c.links)
				for _, argv := range [][]string{{"-l"}, {"--", "echo", "ran"}} {
					res, err := h.Exec(context.Background(), argv, hostgate.ExecOptions{})
					if err != nil || res.ExitCode != 127 || len(res.Stdout) != 0 || !strings.Contains(string(res.Stderr), argv[0]+": ") {
						t.Errorf("exec %q: %+v %q, %v; want 127, not found", argv, res, res.Stderr, err)
					}
				}
			})
		})
	}
}
