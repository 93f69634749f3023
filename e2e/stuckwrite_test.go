package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"sync"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
)

// stopOnRead is a reader that stops the agent (SIGSTOP) at its first Read:
// the host stops reading once the call is under way.
type stopOnRead struct {
	r    io.Reader
	stop func()
}

func (s *stopOnRead) Read(p []byte) (int, error) {
	s.stop()
	return s.r.Read(p)
}

// stopFS is an fs.FS whose files stop the agent at their first Read.
type stopFS struct {
	fs.FS
	stop func()
}

type stopFile struct {
	fs.File
	stop func()
}

func (f stopFile) Read(p []byte) (int, error) { f.stop(); return f.File.Read(p) }

func (s stopFS) Open(name string) (fs.File, error) {
	f, err := s.FS.Open(name)
	if err != nil || name == "." {
		return f, err
	}
	return stopFile{f, s.stop}, nil
}

// TestWritesToStoppedAgentEndWithCtx: an SFTP write, Exec's stdin, an
// Upload (both ways) and a local forward's copy, each of 32 MiB, to a host
// whose agent stops (SIGSTOP: it reads nothing more) once the call is
// under way end with their 2 s ctx, and the connection works once the
// agent goes on. The SFTP writes and Exec and Upload (waiting for the
// process's end) returned 60 s on, when the gateway's keepalive cut the
// agent's tunnel (found by the stuckwrite audit).
func TestWritesToStoppedAgentEndWithCtx(t *testing.T) {
	g := startGateway(t, "")
	a := g.startAgent("alpha", "")
	ctx := testCtx(t, 5*time.Minute)
	dir := t.TempDir()
	pid := a.cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	echo := echoServer(t)
	data := bytes.Repeat([]byte("0123456789abcdef"), 2<<20) // 32 MiB
	calls := []struct {
		name string
		call func(ctx context.Context, h *hostgate.Host, stop func()) error
	}{
		{"sftp write", func(ctx context.Context, h *hostgate.Host, stop func()) error {
			fsys, err := h.FS(ctx)
			if err != nil {
				return err
			}
			w, err := fsys.Create(ctx, dir+"/f", 0o644)
			if err != nil {
				return err
			}
			stop()
			_, err = w.Write(data)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
			return err
		}},
		{"exec stdin", func(ctx context.Context, h *hostgate.Host, stop func()) error {
			_, err := h.Exec(ctx, []string{"cat"}, hostgate.ExecOptions{Stdin: &stopOnRead{bytes.NewReader(data), stop}})
			return err
		}},
		{"upload", func(ctx context.Context, h *hostgate.Host, stop func()) error {
			return hostgate.Upload(ctx, h, stopFS{fstest.MapFS{"big": {Data: data}}, stop}, dir+"/up", nil)
		}},
		{"upload, filesystem way", func(ctx context.Context, h *hostgate.Host, stop func()) error {
			return hostgate.Upload(ctx, h, stopFS{fstest.MapFS{"big": {Data: data}}, stop}, dir+"/upfs", &hostgate.TransferOptions{NoTar: true})
		}},
		{"forward", func(ctx context.Context, h *hostgate.Host, stop func()) error {
			fw, err := h.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: echo})
			if err != nil {
				return err
			}
			c, err := net.Dial("tcp", fw.Addr().String())
			if err != nil {
				return err
			}
			defer c.Close()
			if _, err := c.Write([]byte("ping\n")); err != nil {
				return err
			}
			if _, err := io.ReadFull(c, make([]byte, 5)); err != nil {
				return err
			}
			stop()
			go func() { _, _ = c.Write(data) }() // what the host no longer reads
			<-fw.Done()
			return context.Cause(ctx)
		}},
	}
	for _, c := range calls {
		h := dialWorking(t, ctx, g, "alpha")
		var once sync.Once
		stop := func() {
			once.Do(func() {
				if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
					t.Error(err)
				}
			})
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- c.call(cctx, h, stop) }()
		select {
		case err := <-done:
			t.Logf("%s: returned %v after its start, its ctx 2 s: %v", c.name, time.Since(start).Round(time.Millisecond), err)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s to a stopped agent: %v, want ctx's error", c.name, err)
			}
		case <-time.After(30 * time.Second): // a guard against a hang (the gateway cuts the tunnel at 60 s), not a timing
			t.Errorf("%s to a stopped agent: still waiting 30 s after its start, its ctx 2 s", c.name)
			<-done
		}
		cancel()
		_ = syscall.Kill(pid, syscall.SIGCONT)
		// A host that was merely slow keeps its connection: what was
		// given up on is cut off, the rest goes on.
		if _, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err != nil {
			t.Errorf("after %s, the agent going on: exec: %v", c.name, err)
		}
		if fsys, err := h.FS(ctx); err != nil {
			t.Errorf("after %s, the agent going on: %v", c.name, err)
		} else if err := writeAll(ctx, fsys, dir+"/after", []byte("after")); err != nil {
			t.Errorf("after %s, the agent going on: sftp write: %v", c.name, err)
		}
		h.Close()
	}
}

// dialWorking dials host id until a command runs on it (an agent that was
// stopped reconnects after its tunnel was cut).
func dialWorking(t *testing.T, ctx context.Context, g *gw, id string) *hostgate.Host {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		h, err := client.Dial(ctx, g.url, g.admin, id)
		if err == nil {
			if _, err = h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err == nil {
				return h
			}
			h.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("host %s: no command runs a minute on: %v", id, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeAll writes name through fsys's Create.
func writeAll(ctx context.Context, fsys hostgate.Provider, name string, b []byte) error {
	w, err := fsys.Create(ctx, name, 0o644)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	return err
}

// readAll reads name through fsys's Open.
func readAll(ctx context.Context, fsys hostgate.Provider, name string) ([]byte, error) {
	r, err := fsys.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
