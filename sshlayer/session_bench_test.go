//go:build linux

package sshlayer

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

const srvBulkSize = 64 << 20

// BenchmarkServerExecStdin pushes 64 MiB into `cat >/dev/null` on one
// connection (a session per iteration), ours vs sshd with the same
// x/crypto client: the agent's channel → child stdin path (issue 7).
func BenchmarkServerExecStdin(b *testing.B) {
	data := make([]byte, srvBulkSize)
	for i := range data {
		data[i] = byte(i * 7)
	}
	srvBenchPeers(b, func(b *testing.B, c *ssh.Client, _ string) {
		b.SetBytes(srvBulkSize)
		for b.Loop() {
			s, err := c.NewSession()
			if err != nil {
				b.Fatal(err)
			}
			s.Stdin = bytes.NewReader(data)
			if err := s.Run("cat >/dev/null"); err != nil {
				b.Fatal(err)
			}
			_ = s.Close()
		}
	})
}

// BenchmarkServerExecStdout reads 64 MiB of a command's stdout (`cat` of a
// file), ours vs sshd: the child stdout → channel path.
func BenchmarkServerExecStdout(b *testing.B) {
	srvBenchPeers(b, func(b *testing.B, c *ssh.Client, dir string) {
		path := filepath.Join(dir, "f")
		if err := os.WriteFile(path, make([]byte, srvBulkSize), 0o644); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(srvBulkSize)
		for b.Loop() {
			s, err := c.NewSession()
			if err != nil {
				b.Fatal(err)
			}
			out, err := s.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Start("cat " + path); err != nil {
				b.Fatal(err)
			}
			n, err := io.Copy(io.Discard, out)
			if err != nil || n != srvBulkSize {
				b.Fatal(fmt.Errorf("read %d of %d: %w", n, srvBulkSize, err))
			}
			if err := s.Wait(); err != nil {
				b.Fatal(err)
			}
			_ = s.Close()
		}
	})
}

// BenchmarkServerSFTPWrite writes a 16 MiB file through the SFTP subsystem
// (pkg/sftp's concurrent writes, 256 KiB packets as our client sends),
// ours vs OpenSSH's sftp-server.
func BenchmarkServerSFTPWrite(b *testing.B) {
	const size = 16 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	srvBenchPeers(b, func(b *testing.B, c *ssh.Client, dir string) {
		sc, err := sftp.NewClient(c, sftp.UseConcurrentWrites(true), sftp.MaxPacketUnchecked(sftpMaxPacket))
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = sc.Close() }()
		// sshd writes as its unprivileged benchmark user.
		if err := os.Chmod(dir, 0o777); err != nil {
			b.Fatal(err)
		}
		path := filepath.Join(dir, "f")
		b.SetBytes(size)
		for b.Loop() {
			f, err := sc.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			n, err := f.ReadFrom(bytes.NewReader(data))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil || n != size {
				b.Fatalf("wrote %d of %d: %v", n, size, err)
			}
		}
	})
}
