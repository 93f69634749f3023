//go:build unix

package hostgate_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
)

func TestExecExitCodes(t *testing.T) {
	for _, persistent := range []bool{false, true} {
		h, _ := localHost(t, persistent)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, c := range []struct {
			script string
			code   int
			sig    hostgate.Signal
		}{
			{"exit 0", 0, ""},
			{"exit 1", 1, ""},
			{"exit 7", 7, ""},
			{"exit 255", 255, ""},
			{"kill -s TERM $$", -1, hostgate.SIGTERM},
			{"kill -s KILL $$", -1, hostgate.SIGKILL},
		} {
			res, err := h.Exec(ctx, []string{"sh", "-c", c.script}, hostgate.ExecOptions{})
			if err != nil {
				t.Errorf("persistent=%v %q: %v", persistent, c.script, err)
				continue
			}
			if res.ExitCode != c.code || res.Signal != c.sig {
				t.Errorf("persistent=%v %q: code %d signal %q, want %d %q", persistent, c.script, res.ExitCode, res.Signal, c.code, c.sig)
			}
		}
		_, err := h.Exec(ctx, []string{"/nonexistent/command"}, hostgate.ExecOptions{})
		if persistent {
			// Under the watchdog the shell reports 127 (not found).
			if res, _ := h.Exec(ctx, []string{"/nonexistent/command"}, hostgate.ExecOptions{}); res == nil || res.ExitCode != 127 {
				t.Errorf("persistent missing command: %+v", res)
			}
		} else if err == nil {
			t.Errorf("missing command: no error")
		}
	}
}

func TestExecOutputLimit(t *testing.T) {
	for _, persistent := range []bool{false, true} {
		h, _ := localHost(t, persistent)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// yes never stops on its own: Exec returning at all shows the
		// process was killed. Under the watchdog it runs as a grandchild
		// (sh forks it), which the group kill must reach; without one,
		// only a direct child can be killed.
		argv := []string{"yes"}
		if persistent {
			argv = []string{"sh", "-c", "yes; echo never >&2"}
		}
		res, err := h.Exec(ctx, argv, hostgate.ExecOptions{MaxOutput: 10000})
		if !errors.Is(err, hostgate.ErrOutputLimit) {
			t.Fatalf("persistent=%v: err %v, want ErrOutputLimit", persistent, err)
		}
		if n := len(res.Stdout) + len(res.Stderr); n != 10000 {
			t.Errorf("persistent=%v: collected %d bytes, want exactly the limit", persistent, n)
		}
		if !bytes.HasPrefix(res.Stdout, []byte("y\ny\n")) {
			t.Errorf("stdout starts %q", res.Stdout[:min(10, len(res.Stdout))])
		}
		// Exactly the limit is fine.
		res, err = h.Exec(ctx, []string{"head", "-c", "10000", "/dev/zero"}, hostgate.ExecOptions{MaxOutput: 10000})
		if err != nil || len(res.Stdout) != 10000 || res.ExitCode != 0 {
			t.Errorf("persistent=%v: output at the limit: %v, %d bytes", persistent, err, len(res.Stdout))
		}
		// stderr counts too.
		_, err = h.Exec(ctx, []string{"sh", "-c", "head -c 6000 /dev/zero; head -c 6000 /dev/zero >&2"}, hostgate.ExecOptions{MaxOutput: 10000})
		if !errors.Is(err, hostgate.ErrOutputLimit) {
			t.Errorf("persistent=%v: stdout+stderr over limit: %v", persistent, err)
		}
	}
}

// TestExecCtxDeadline: a deadline that passes while the process runs kills
// it, and Exec reports the deadline, not the kill, as its error. The
// deadline passes once the process has started (Exec reads stdin only after
// Spawn): a fixed 300 ms timeout could pass during Spawn on a loaded
// machine, which is another path (no result at all).
func TestExecCtxDeadline(t *testing.T) {
	h, _ := localHost(t, false)
	ctx := &manualDeadline{Context: context.Background(), done: make(chan struct{})}
	stdin := readFunc(func([]byte) (int, error) { ctx.pass(); return 0, io.EOF })
	res, err := h.Exec(ctx, []string{"sleep", "300"}, hostgate.ExecOptions{Stdin: stdin})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Exec past deadline: %v, want DeadlineExceeded", err)
	}
	if res == nil || res.ExitCode != -1 {
		t.Errorf("result %+v", res)
	}
}

// TestExecCtxEndsStdinWait: ctx bounds Exec also while its Stdin's Read
// blocks: Exec waited for that copy past its deadline (20 s past a 3 s
// one, found by the audit31 audit).
func TestExecCtxEndsStdinWait(t *testing.T) {
	h, _ := localHost(t, false)
	ctx := &manualDeadline{Context: context.Background(), done: make(chan struct{})}
	release := make(chan struct{})
	defer close(release) // the copy's goroutine ends with the Read
	stdin := readFunc(func([]byte) (int, error) { ctx.pass(); <-release; return 0, io.EOF })
	done := make(chan error, 1)
	go func() {
		_, err := h.Exec(ctx, []string{"sleep", "300"}, hostgate.ExecOptions{Stdin: stdin})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Exec past deadline with a blocked Stdin: %v, want DeadlineExceeded", err)
		}
	case <-time.After(time.Minute): // a guard against a hang, not a timing
		t.Fatal("Exec still waiting on its Stdin a minute after its deadline")
	}
}

// TestExecStdin: stdin is streamed (larger than any pipe buffer), and a
// process that exits without reading it does not hang Exec.
func TestExecStdin(t *testing.T) {
	for _, persistent := range []bool{false, true} {
		h, _ := localHost(t, persistent)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		big := bytes.Repeat([]byte("z"), 8<<20)
		res, err := h.Exec(ctx, []string{"wc", "-c"}, hostgate.ExecOptions{Stdin: bytes.NewReader(big)})
		if err != nil || strings.TrimSpace(string(res.Stdout)) != "8388608" {
			t.Errorf("persistent=%v wc -c: %q, %v", persistent, res.Stdout, err)
		}
		res, err = h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{Stdin: bytes.NewReader(big)})
		if err != nil || res.ExitCode != 0 {
			t.Errorf("persistent=%v true with unread stdin: %+v, %v", persistent, res, err)
		}
	}
}

// manualDeadline is a context whose deadline passes when pass is called.
type manualDeadline struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func (c *manualDeadline) Done() <-chan struct{} { return c.done }

func (c *manualDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (c *manualDeadline) pass() { c.once.Do(func() { close(c.done) }) }

type readFunc func([]byte) (int, error)

func (f readFunc) Read(p []byte) (int, error) { return f(p) }
