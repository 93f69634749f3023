package hostgate_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
)

// floodTransport spawns processes that print without end until they are
// killed, on a host that then answers nothing: it never confirms the
// kill, nor the session's close, and the process's streams and Wait end
// only when the test releases them (the connection's end).
type floodTransport struct {
	release chan struct{}
	once    sync.Once
	killed  chan struct{}
	kOnce   sync.Once
}

func newFloodTransport(t *testing.T) *floodTransport {
	tr := &floodTransport{release: make(chan struct{}), killed: make(chan struct{})}
	t.Cleanup(tr.end)
	return tr
}

func (tr *floodTransport) end() { tr.once.Do(func() { close(tr.release) }) }

func (tr *floodTransport) Spawn(ctx context.Context, argv []string, opts hostgate.SpawnOptions) (hostgate.Process, error) {
	p := &floodProcess{tr: tr}
	// The session's close on this side goes out; the host ignores it.
	context.AfterFunc(ctx, func() { tr.kOnce.Do(func() { close(tr.killed) }) })
	return p, nil
}

type floodProcess struct{ tr *floodTransport }

func (p *floodProcess) Stdin() io.WriteCloser { return nopWriteCloser{} }
func (p *floodProcess) Stdout() io.Reader     { return p }
func (p *floodProcess) Stderr() io.Reader     { return p }
func (p *floodProcess) Kill(hostgate.Signal) error {
	p.tr.kOnce.Do(func() { close(p.tr.killed) })
	return nil // sent; the host does not act on it
}
func (p *floodProcess) Wait() error { <-p.tr.release; return errors.New("connection lost") }

func (p *floodProcess) Read(b []byte) (int, error) {
	select {
	case <-p.tr.killed:
		<-p.tr.release
		return 0, io.EOF
	default:
	}
	for i := range b {
		b[i] = 'y'
	}
	return len(b), nil
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(b []byte) (int, error) { return len(b), nil }
func (nopWriteCloser) Close() error                { return nil }

// TestExecOutputLimitOnSilentHost: Exec of a command that prints past
// MaxOutput, on a host that never confirms the kill or the session's
// close, returns ErrOutputLimit with what it collected, having given it
// all to ExecOptions.Stdout, with a ctx that never ends. It waited for the host's word, bounded by ctx alone.
func TestExecOutputLimitOnSilentHost(t *testing.T) {
	defer hostgate.SetOutputLimitGrace(50 * time.Millisecond)()
	tr := newFloodTransport(t)
	h := hostgate.New(hostgate.Info{}, func(ctx context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{Transport: tr, Close: func() error { return nil }}, nil
	})
	defer h.Close()
	guard, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		res *hostgate.ExecResult
		err error
	}
	done := make(chan result, 1)
	var shown bytes.Buffer // written only while Exec runs
	go func() {
		res, err := h.Exec(context.Background(), []string{"yes"}, hostgate.ExecOptions{MaxOutput: 100000, Stdout: &shown})
		done <- result{res, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-guard.Done():
		t.Fatal("Exec past its output limit still waits for a host that never confirms the kill")
	}
	if !errors.Is(r.err, hostgate.ErrOutputLimit) {
		t.Fatalf("Exec: %v, want ErrOutputLimit", r.err)
	}
	if n := len(r.res.Stdout) + len(r.res.Stderr); n != 100000 || r.res.ExitCode != -1 {
		t.Errorf("collected %d bytes, exit %d; want exactly the limit, -1", n, r.res.ExitCode)
	}
	if !bytes.Equal(shown.Bytes(), r.res.Stdout) {
		t.Errorf("ExecOptions.Stdout was given %d bytes, the result has %d", shown.Len(), len(r.res.Stdout))
	}
	select {
	case <-tr.killed:
	default:
		t.Error("the command was not killed")
	}
}
