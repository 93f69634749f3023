//go:build unix

package sshlayer

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
)

// BenchmarkOpLatency: a host's calls in round trips over a link with 25 ms
// one way (rtt/op, the median call's; rtt-least/op), to this package's
// server and to OpenSSH's sshd. A program far from its host (an agent in
// one region driving machines in another) waits each round trip out:
//   - exec: Exec of true on a connection in use, one after another;
//   - exec-first: the first Exec on a new connection;
//   - sftp-first: the first filesystem call (a Stat) after a command;
//   - stat-first: the first filesystem call on a new connection;
//   - pty: true on a terminal until it exits (a terminal's session opens
//     a channel of its own, with a small window);
//   - stat: a Stat once SFTP runs;
//   - open-read-close, create-write-close: a small file through Open and
//     Create;
//   - readfile, writefile: the same through the whole-file calls
//     (hostgate.FileReader, FileWriter), which the synchronous filesystem
//     uses.
//
// Run it with -benchtime=10x.
func BenchmarkOpLatency(b *testing.B) {
	const delay = 25 * time.Millisecond
	dir := b.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("hello, host\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	type opCase struct {
		name  string
		fresh bool // a new connection for each call
		prep  func(ctx context.Context, h *hostgate.Host) error
		op    func(ctx context.Context, h *hostgate.Host) error
	}
	exec := func(ctx context.Context, h *hostgate.Host) error {
		_, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
		return err
	}
	stat := func(ctx context.Context, h *hostgate.Host) error {
		fsys, err := h.FS(ctx)
		if err == nil {
			_, err = fsys.Stat(ctx, dir)
		}
		return err
	}
	withFS := func(f func(ctx context.Context, fsys hostgate.Provider) error) func(ctx context.Context, h *hostgate.Host) error {
		return func(ctx context.Context, h *hostgate.Host) error {
			fsys, err := h.FS(ctx)
			if err != nil {
				return err
			}
			return f(ctx, fsys)
		}
	}
	cases := []opCase{
		{name: "exec", prep: exec, op: exec},
		{name: "exec-first", fresh: true, op: exec},
		{name: "sftp-first", fresh: true, prep: exec, op: stat},
		{name: "stat-first", fresh: true, op: stat},
		{name: "pty", prep: exec, op: func(ctx context.Context, h *hostgate.Host) error {
			p, err := h.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{PTY: &hostgate.PTY{}})
			if err != nil {
				return err
			}
			go func() { _, _ = io.Copy(io.Discard, p.Stdout()) }()
			return p.Wait()
		}},
		{name: "stat", prep: stat, op: stat},
		{name: "open-read-close", prep: stat, op: withFS(func(ctx context.Context, fsys hostgate.Provider) error {
			r, err := fsys.Open(ctx, small)
			if err != nil {
				return err
			}
			if _, err := io.ReadAll(r); err != nil {
				return err
			}
			return r.Close()
		})},
		{name: "create-write-close", prep: stat, op: withFS(func(ctx context.Context, fsys hostgate.Provider) error {
			w, err := fsys.Create(ctx, out, 0o644)
			if err != nil {
				return err
			}
			if _, err := w.Write([]byte("hello, host\n")); err != nil {
				return err
			}
			return w.Close()
		})},
		{name: "readfile", prep: stat, op: withFS(func(ctx context.Context, fsys hostgate.Provider) error {
			_, err := fsys.(hostgate.FileReader).ReadFile(ctx, small, nil)
			return err
		})},
		{name: "writefile", prep: stat, op: withFS(func(ctx context.Context, fsys hostgate.Provider) error {
			return fsys.(hostgate.FileWriter).WriteFile(ctx, out, 0o644, strings.NewReader("hello, host\n"), nil)
		})},
	}
	run := func(b *testing.B, dial func(testing.TB) net.Conn, auth Auth, oc opCase) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		connect := func() *hostgate.Host {
			c, err := Connect(ctx, testenv.DelayedLink(b, dial(b), delay), auth)
			if err != nil {
				b.Fatal(err)
			}
			h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) { return c.Connection(nil), nil })
			if oc.prep != nil {
				if err := oc.prep(ctx, h); err != nil {
					b.Fatal(err)
				}
			}
			return h
		}
		var h *hostgate.Host
		var spent []time.Duration
		for b.Loop() {
			if h == nil {
				h = connect()
			}
			t0 := time.Now()
			err := oc.op(ctx, h)
			spent = append(spent, time.Since(t0))
			if err != nil {
				b.Fatal(err)
			}
			if oc.fresh {
				_ = h.Close()
				h = nil
			}
		}
		if h != nil {
			_ = h.Close()
		}
		testenv.ReportRoundTrips(b, spent, delay)
	}
	for _, oc := range cases {
		b.Run("server=hostgate/op="+oc.name, func(b *testing.B) {
			ts, err := StartTestServer()
			if err != nil {
				b.Fatal(err)
			}
			defer ts.Close()
			run(b, func(tb testing.TB) net.Conn {
				c, err := net.Dial("tcp", ts.Addr)
				if err != nil {
					tb.Fatal(err)
				}
				return c
			}, Auth{Signer: ts.ClientSigner, HostKey: ts.HostKey}, oc)
		})
		b.Run("server=sshd/op="+oc.name, func(b *testing.B) {
			s := startSSHD(b, sshdOptions{})
			run(b, s.dial, s.auth(), oc)
		})
	}
}
