//go:build unix

package syncfs

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/sshtest"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/sshlayer"
)

// BenchmarkLatency measures what each call costs in round trips over a
// link with 25 ms one way (real time, as the audit that found ReadFile at
// 4.3 and WriteFile at 6.3 measured it), reported as rtt/op, the median
// call's, and rtt-least/op: to the agent's server over SSH, and to OpenSSH's
// sftp-server. Run it with -benchtime=20x; each call takes a few hundred
// milliseconds.
func BenchmarkLatency(b *testing.B) {
	const delay = 25 * time.Millisecond
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "4k"), make([]byte, 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "hostname"), []byte("hostgate-test\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "1m"), make([]byte, 1<<20), 0o644); err != nil {
		b.Fatal(err)
	}
	link := &slowLink{delay: delay}
	b.Cleanup(link.wg.Wait)
	ts, auth := sshtest.Server(b)
	agent := sshlayer.SyncSpec(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", ts.Addr)
		if err != nil {
			return nil, err
		}
		near, far := net.Pipe()
		link.pipe(c, far, nil)
		link.pipe(far, c, nil)
		return near, nil
	}, auth)
	newServer(b) // skips without sftp-server
	openssh := &hostgate.SyncSpec{Connect: func(ctx context.Context) (*hostgate.SyncConnection, error) {
		cmd := exec.Command(sftpServerPath)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		link.pipe(stdin, inR, nil)
		link.pipe(outW, stdout, nil)
		cli, err := sftp.NewClientPipe(outR, inW, sshlayer.SFTPClientOptions()...)
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, err
		}
		return &hostgate.SyncConnection{FS: sshlayer.NewSFTPProvider(cli), Close: func() error {
			_ = cli.Close()
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil
		}}, nil
	}}
	for _, peer := range []struct {
		name string
		spec *hostgate.SyncSpec
	}{{"agent", agent}, {"openssh", openssh}} {
		fsys := New(peer.spec, &Options{Root: root})
		b.Cleanup(func() { _ = fsys.Close() })
		if _, err := fsys.Stat("."); err != nil {
			b.Fatal(err)
		}
		for _, op := range []struct {
			name string
			fn   func() error
		}{
			{"Stat", func() error { _, err := fsys.Stat("4k"); return err }},
			{"ReadFile14B", func() error { _, err := fsys.ReadFile("hostname"); return err }},
			{"ReadFile4K", func() error { _, err := fsys.ReadFile("4k"); return err }},
			{"ReadFile1M", func() error { _, err := fsys.ReadFile("1m"); return err }},
			{"WriteFileNew", func() error {
				_ = os.Remove(filepath.Join(root, "new"))
				return fsys.WriteFile("new", []byte("x"), 0o600)
			}},
			{"WriteFileExisting", func() error { return fsys.WriteFile("4k", make([]byte, 4096), 0o644) }},
		} {
			b.Run(peer.name+"/"+op.name, func(b *testing.B) {
				var spent []time.Duration
				for b.Loop() {
					start := time.Now()
					if err := op.fn(); err != nil {
						b.Fatal(err)
					}
					spent = append(spent, time.Since(start))
				}
				testenv.ReportRoundTrips(b, spent, delay)
			})
		}
	}
}
