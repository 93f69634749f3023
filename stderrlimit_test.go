package hostgate_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
)

// TestExecProviderStderrPastItsBound: a host whose commands write stderr
// without end (a shell's startup file in a loop, a hostile host) fails
// ExecProvider's calls at once with ErrOutputLimit naming stderr's bound,
// both a short command (Stat, through uname) and a stream (Open). Both
// read stderr to its end before, which came only with ctx: the calls
// waited out the test's guard.
func TestExecProviderStderrPastItsBound(t *testing.T) {
	// A guard, not a timing.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := hostgate.ExecProvider(stderrFloodTransport{})
	_, err := p.Stat(ctx, "/")
	if !errors.Is(err, hostgate.ErrOutputLimit) || !strings.Contains(err.Error(), "stderr") || !strings.Contains(err.Error(), "4096 bytes") {
		t.Errorf("Stat on a host writing stderr without end: %v, want ErrOutputLimit naming stderr's 4096 bytes", err)
	}
	r, err := p.Open(ctx, "f")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()
	_, err = io.ReadAll(r)
	if !errors.Is(err, hostgate.ErrOutputLimit) || !strings.Contains(err.Error(), "stderr") || !strings.Contains(err.Error(), "4096 bytes") {
		t.Errorf("reading a file on a host writing stderr without end: %v, want ErrOutputLimit naming stderr's 4096 bytes", err)
	}
}

// stderrFloodTransport's processes print "k" and a line on stdout, then
// write stderr without end until they are killed or their session is
// closed on this side (Spawn's ctx), as over SSH.
type stderrFloodTransport struct{}

func (stderrFloodTransport) Spawn(ctx context.Context, argv []string, opts hostgate.SpawnOptions) (hostgate.Process, error) {
	ctx, cancel := context.WithCancel(ctx)
	return &stderrFloodProcess{ctx: ctx, cancel: cancel, stdout: strings.NewReader("kLinux\n")}, nil
}

type stderrFloodProcess struct {
	ctx    context.Context
	cancel context.CancelFunc
	stdout io.Reader
}

func (p *stderrFloodProcess) Stdin() io.WriteCloser { return nopWriteCloser{} }
func (p *stderrFloodProcess) Stdout() io.Reader     { return p.stdout }
func (p *stderrFloodProcess) Stderr() io.Reader     { return (*stderrFlood)(p) }
func (p *stderrFloodProcess) Kill(hostgate.Signal) error {
	p.cancel()
	return nil
}
func (p *stderrFloodProcess) Wait() error {
	<-p.ctx.Done()
	return &hostgate.ExitError{Code: -1, Signal: hostgate.SIGKILL}
}

type stderrFlood stderrFloodProcess

func (p *stderrFlood) Read(b []byte) (int, error) {
	if p.ctx.Err() != nil {
		return 0, io.EOF
	}
	for i := range b {
		b[i] = 'e'
	}
	return len(b), nil
}
