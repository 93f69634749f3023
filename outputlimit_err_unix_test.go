//go:build unix

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

// TestOutputLimitErrorSaysWhat: a command past its output limit fails
// with an error that still matches ErrOutputLimit and names the limit and
// the option that raises it; it said only "output limit exceeded".
// ExecProvider's bound on a host's answer matches ErrOutputLimit too
// (it was a bare "output larger than N bytes").
func TestOutputLimitErrorSaysWhat(t *testing.T) {
	h, _ := localHost(t, false)
	_, err := h.Exec(context.Background(), []string{"yes"}, hostgate.ExecOptions{MaxOutput: 10000})
	if !errors.Is(err, hostgate.ErrOutputLimit) || !strings.Contains(err.Error(), "10000 bytes") || !strings.Contains(err.Error(), "ExecOptions.MaxOutput") {
		t.Errorf("Exec past MaxOutput: %v, want ErrOutputLimit naming 10000 bytes and ExecOptions.MaxOutput", err)
	}

	// A host whose uname (ExecProvider's first question) answers without
	// end. A guard, not a timing: reading on to the answer's end held
	// Stat until ctx ended.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = hostgate.ExecProvider(endlessTransport{}).Stat(ctx, "/")
	if !errors.Is(err, hostgate.ErrOutputLimit) || !strings.Contains(err.Error(), "65536 bytes") {
		t.Errorf("ExecProvider on a host answering without end: %v, want ErrOutputLimit naming 65536 bytes", err)
	}
}

// endlessTransport's processes print on stdout without end until they
// are killed or their session is closed on this side (Spawn's ctx), as
// over SSH.
type endlessTransport struct{}

func (endlessTransport) Spawn(ctx context.Context, argv []string, opts hostgate.SpawnOptions) (hostgate.Process, error) {
	ctx, cancel := context.WithCancel(ctx)
	return &endlessProcess{ctx: ctx, cancel: cancel}, nil
}

type endlessProcess struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func (p *endlessProcess) Stdin() io.WriteCloser { return nopWriteCloser{} }
func (p *endlessProcess) Stdout() io.Reader     { return p }
func (p *endlessProcess) Stderr() io.Reader     { return strings.NewReader("") }
func (p *endlessProcess) Kill(hostgate.Signal) error {
	p.cancel()
	return nil
}
func (p *endlessProcess) Wait() error {
	<-p.ctx.Done()
	return &hostgate.ExitError{Code: -1, Signal: hostgate.SIGKILL}
}

func (p *endlessProcess) Read(b []byte) (int, error) {
	if p.ctx.Err() != nil {
		return 0, io.EOF
	}
	for i := range b {
		b[i] = 'y'
	}
	return len(b), nil
}
