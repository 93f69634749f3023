package localexec

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hostgate/hostgate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func run(t *testing.T, tr *Transport, argv []string, opts hostgate.SpawnOptions, stdin string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := tr.Spawn(ctx, argv, opts)
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(&out, p.Stdout()) }()
	go func() { defer wg.Done(); _, _ = io.Copy(&errb, p.Stderr()) }()
	_, _ = io.WriteString(p.Stdin(), stdin)
	_ = p.Stdin().Close()
	wg.Wait()
	return out.String(), errb.String(), p.Wait()
}

func TestSpawnDirEnvStdio(t *testing.T) {
	tr := &Transport{}
	dir := t.TempDir()
	out, errs, err := run(t, tr, []string{"sh", "-c", `pwd; echo "$A"; cat; echo err >&2`},
		hostgate.SpawnOptions{Dir: dir, Env: map[string]string{"A": "a b 'c'"}}, "input")
	if err != nil {
		t.Fatal(err)
	}
	if want := dir + "\na b 'c'\ninput"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	if errs != "err\n" {
		t.Errorf("stderr %q", errs)
	}
}

func TestExitStatusAndSignal(t *testing.T) {
	tr := &Transport{}
	_, _, err := run(t, tr, []string{"sh", "-c", "exit 4"}, hostgate.SpawnOptions{}, "")
	var ee *hostgate.ExitError
	if !errors.As(err, &ee) || ee.Code != 4 {
		t.Errorf("exit 4: %v", err)
	}
	_, _, err = run(t, tr, []string{"sh", "-c", "kill -s TERM $$"}, hostgate.SpawnOptions{}, "")
	if !errors.As(err, &ee) || ee.Signal != hostgate.SIGTERM || ee.Code != -1 {
		t.Errorf("TERM: %v", err)
	}
}

// TestSignalsAsTheSSHTransportReportsThem: a command killed by a signal
// ends as sshlayer's server tells hostgate's client: a signal it names
// (RFC 4254's, BUS, TRAP) by name, any other (VTALRM, XCPU) as exit
// status 128+N, the way a shell says it, not as a number for a name.
func TestSignalsAsTheSSHTransportReportsThem(t *testing.T) {
	tr := &Transport{}
	for _, tc := range []struct {
		sig    string
		code   int
		signal hostgate.Signal
	}{
		{"BUS", -1, "BUS"},
		{"TRAP", -1, "TRAP"},
		{"VTALRM", 128 + 26, ""},
		{"XCPU", 128 + 24, ""},
	} {
		// No core file: these dump core by default.
		_, _, err := run(t, tr, []string{"sh", "-c", "ulimit -c 0; kill -s " + tc.sig + " $$"}, hostgate.SpawnOptions{Dir: t.TempDir()}, "")
		var ee *hostgate.ExitError
		if !errors.As(err, &ee) || ee.Code != tc.code || ee.Signal != tc.signal {
			t.Errorf("%s: %#v; want code %d, signal %q", tc.sig, err, tc.code, tc.signal)
		}
	}
}

func TestRefusals(t *testing.T) {
	tr := &Transport{}
	ctx := context.Background()
	if _, err := tr.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{PTY: &hostgate.PTY{}}); !errors.Is(err, hostgate.ErrNotSupported) {
		t.Errorf("PTY: %v", err)
	}
	if _, err := tr.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{Env: map[string]string{"A=B": "x"}}); err == nil {
		t.Errorf("invalid env name accepted")
	}
	if _, err := tr.Spawn(ctx, nil, hostgate.SpawnOptions{}); err == nil {
		t.Errorf("empty argv accepted")
	}
	if _, err := tr.Spawn(ctx, []string{"/nonexistent/x"}, hostgate.SpawnOptions{}); err == nil {
		t.Errorf("missing program accepted")
	}
	if n := len(tr.Pids()); n != 0 {
		t.Errorf("%d processes tracked after refusals", n)
	}
}

func TestKillAndCancelReachDirectChild(t *testing.T) {
	tr := &Transport{}
	ctx, cancel := context.WithCancel(context.Background())
	p, err := tr.Spawn(ctx, []string{"sleep", "300"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pids := tr.Pids(); len(pids) != 1 {
		t.Fatalf("Pids = %v", pids)
	}
	cancel()
	var ee *hostgate.ExitError
	if err := p.Wait(); !errors.As(err, &ee) || ee.Signal != hostgate.SIGKILL {
		t.Errorf("after cancel: %v", err)
	}
	if err := p.Kill(hostgate.SIGTERM); err != nil {
		t.Errorf("Kill after exit: %v", err)
	}
	p, err = tr.Spawn(context.Background(), []string{"sleep", "300"}, hostgate.SpawnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Kill("BOGUS"); err == nil || !strings.Contains(err.Error(), "BOGUS") {
		t.Errorf("unknown signal: %v", err)
	}
	if err := p.Kill(hostgate.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); !errors.As(err, &ee) || ee.Signal != hostgate.SIGINT {
		t.Errorf("after INT: %v", err)
	}
	if n := len(tr.Pids()); n != 0 {
		t.Errorf("%d processes tracked after exit", n)
	}
}
