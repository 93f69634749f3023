//go:build linux

package sshlayer

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"testing"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/testenv"
)

// srvSSHDConfig is OpenSSH sshd's config for the benchmark peer, run in
// inetd mode (-i) on one end of a loopback TCP pair, as x/crypto's
// ssh/test does: no port to pick, no daemon to stop.
const srvSSHDConfig = `HostKey %[1]s/host_key
AuthorizedKeysFile %[1]s/authorized_keys
PidFile none
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
Subsystem sftp /usr/lib/openssh/sftp-server
LogLevel ERROR
`

// srvDialSSHD starts `sshd -i` on a fresh loopback connection and returns
// an x/crypto client on it.
func srvDialSSHD(b *testing.B, client ssh.Signer) *ssh.Client {
	b.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		sshd = "/usr/sbin/sshd"
	}
	_, statErr := os.Stat(sshd)
	testenv.RequirePeer(b, "OpenSSH sshd", statErr == nil)
	_ = os.MkdirAll("/run/sshd", 0o755) // privilege separation dir sshd insists on
	// sshd reads authorized_keys as the target user: the dir must be
	// world-traversable, which b.TempDir's parent is not.
	dir, err := os.MkdirTemp("", "hostgate-sshd-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	hostKey, hostPEM, _ := newEd25519Signer()
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "host_key"), hostPEM, 0o600))
	must(os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(client.PublicKey()), 0o644))
	must(os.WriteFile(filepath.Join(dir, "sshd_config"), fmt.Appendf(nil, srvSSHDConfig, dir), 0o600))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	c1, err := net.Dial("tcp", ln.Addr().String())
	must(err)
	c2, err := ln.Accept()
	must(err)
	_ = ln.Close()
	f, err := c2.(*net.TCPConn).File()
	must(err)
	_ = c2.Close()
	cmd := exec.Command(sshd, "-f", filepath.Join(dir, "sshd_config"), "-i", "-e")
	cmd.Stdin, cmd.Stdout = f, f
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	must(cmd.Start())
	_ = f.Close()
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if b.Failed() {
			b.Logf("sshd: %s", stderr.String())
		}
	})
	conn, chans, reqs, err := ssh.NewClientConn(c1, "sshd", &ssh.ClientConfig{
		User: srvBenchUser(b), Auth: []ssh.AuthMethod{ssh.PublicKeys(client)},
		HostKeyCallback: ssh.FixedHostKey(hostKey.PublicKey()),
	})
	if err != nil {
		b.Fatalf("sshd: %v; stderr %s", err, stderr.String())
	}
	c := ssh.NewClient(conn, chans, reqs)
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// srvBenchUserName is the account sshd runs the benchmark's commands as.
// It has /bin/sh as its shell, like our server: root's login shell here is
// bash, which sources ~/.bashrc for commands run by sshd, and that (not
// sshd) would dominate the measurement.
const srvBenchUserName = "hostgate-bench"

func srvBenchUser(b *testing.B) string {
	if _, err := user.Lookup(srvBenchUserName); err != nil {
		// A system account without a home, unlocked ('*': no password, but
		// not the "!" that sshd treats as a locked account).
		out, err := exec.Command("useradd", "--system", "--no-create-home", "--home-dir", "/tmp",
			"--shell", "/bin/sh", "--password", "*", srvBenchUserName).CombinedOutput()
		if err != nil {
			b.Logf("cannot create %s (%v: %s); sshd runs commands as root through root's shell", srvBenchUserName, err, out)
			return "root"
		}
	}
	return srvBenchUserName
}

func srvBenchExec(b *testing.B, c *ssh.Client) {
	b.ReportAllocs()
	for b.Loop() {
		s, err := c.NewSession()
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Run("true"); err != nil {
			b.Fatal(err)
		}
		_ = s.Close()
	}
}

// BenchmarkServerExecRoundTrip measures one `true` per session (open,
// exec, exit-status, close) on one connection, on our server and on
// OpenSSH's sshd driven by the same x/crypto client.
func BenchmarkServerExecRoundTrip(b *testing.B) {
	b.Run("hostgate", func(b *testing.B) {
		ts := srvStartServer(b, nil)
		srvBenchExec(b, srvDialServer(b, ts))
	})
	b.Run("openssh-sshd", func(b *testing.B) {
		key, _, _ := newEd25519Signer()
		srvBenchExec(b, srvDialSSHD(b, key))
	})
}

// srvBenchPeers runs body against our server and against sshd, each with
// an x/crypto client and a world-readable scratch dir.
func srvBenchPeers(b *testing.B, body func(b *testing.B, c *ssh.Client, dir string)) {
	srvBenchPeersConfig(b, nil, body)
}

// srvBenchPeersConfig is srvBenchPeers with our server started with cfg.
func srvBenchPeersConfig(b *testing.B, cfg *ServerConfig, body func(b *testing.B, c *ssh.Client, dir string)) {
	scratch := func(b *testing.B) string {
		dir, err := os.MkdirTemp("", "hostgate-bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil { // the sshd user reads it
			b.Fatal(err)
		}
		return dir
	}
	b.Run("hostgate", func(b *testing.B) {
		ts := srvStartServer(b, cfg)
		body(b, srvDialServer(b, ts), scratch(b))
	})
	b.Run("openssh-sshd", func(b *testing.B) {
		key, _, _ := newEd25519Signer()
		body(b, srvDialSSHD(b, key), scratch(b))
	})
}

// BenchmarkServerSFTPRead reads a 16 MiB file through the SFTP subsystem
// (pkg/sftp's concurrent reads), ours vs OpenSSH's sftp-server.
func BenchmarkServerSFTPRead(b *testing.B) {
	const size = 16 << 20
	srvBenchPeers(b, func(b *testing.B, c *ssh.Client, dir string) {
		data := make([]byte, size)
		_, _ = rand.Read(data)
		srvBenchSFTPRead(b, c, dir, data, sftp.UseConcurrentReads(true))
	})
}

// srvBenchSFTPRead writes data to a file in dir and reads it whole through
// an SFTP client on c with opts, once per op.
func srvBenchSFTPRead(b *testing.B, c *ssh.Client, dir string, data []byte, opts ...sftp.ClientOption) {
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	sc, err := sftp.NewClient(c, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sc.Close() }()
	size := int64(len(data))
	b.SetBytes(size)
	for b.Loop() {
		f, err := sc.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		n, err := f.WriteTo(io.Discard)
		_ = f.Close()
		if err != nil || n != size {
			b.Fatalf("read %d of %d: %v", n, size, err)
		}
	}
}

// BenchmarkServerDirectTCPIP pushes bytes through a direct-tcpip channel
// to a loopback sink, ours vs sshd's forwarding.
func BenchmarkServerDirectTCPIP(b *testing.B) {
	const chunk = 1 << 20
	srvBenchPeers(b, func(b *testing.B, c *ssh.Client, _ string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = ln.Close() }()
		got := make(chan int64, 1)
		go func() {
			s, err := ln.Accept()
			if err != nil {
				got <- -1
				return
			}
			n, _ := io.Copy(io.Discard, s)
			_ = s.Close()
			got <- n
		}()
		conn, err := c.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, chunk)
		var sent int64
		b.SetBytes(chunk)
		for b.Loop() {
			if _, err := conn.Write(buf); err != nil {
				b.Fatal(err)
			}
			sent += chunk
		}
		_ = conn.Close()
		if n := <-got; n != sent {
			b.Fatalf("sink got %d of %d bytes", n, sent)
		}
	})
}

// BenchmarkServerSFTPDownload reads a 64 MiB file as hostgate's own
// client does (SFTPClientOptions: 255 KiB requests, 32 in flight, the
// reply's bytes written from the client's pages), ours vs OpenSSH's
// sftp-server: the agent's side of the SFTP download row.
func BenchmarkServerSFTPDownload(b *testing.B) {
	const size = 64 << 20
	// The agent's configuration: its SFTP sessions reuse their buffers.
	srvBenchPeersConfig(b, &ServerConfig{SFTPReuseBuffers: true}, func(b *testing.B, c *ssh.Client, dir string) {
		// No compression on either side: any bytes cost the same.
		srvBenchSFTPRead(b, c, dir, bytes.Repeat([]byte("hostgate"), size/8), SFTPClientOptions()...)
	})
}

// BenchmarkServerForwardRequest is the forward row's shape on the server
// alone: per op a new direct-tcpip channel to a loopback target that
// answers a small reply and closes, as a forwarded HTTP request does.
// Ours vs sshd's; the per-channel cost (dial, goroutines, close), not
// bytes, is what it measures.
func BenchmarkServerForwardRequest(b *testing.B) {
	srvBenchPeers(b, func(b *testing.B, c *ssh.Client, _ string) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = ln.Close() }()
		reply := []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		go func() {
			for {
				s, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					buf := make([]byte, 512)
					if _, err := s.Read(buf); err == nil {
						_, _ = s.Write(reply)
					}
					_ = s.Close()
				}()
			}
		}()
		req := []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		buf := make([]byte, 512)
		for b.Loop() {
			conn, err := c.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := conn.Write(req); err != nil {
				b.Fatal(err)
			}
			n, err := io.ReadFull(conn, buf[:len(reply)])
			if err != nil || n != len(reply) {
				b.Fatalf("reply: %d bytes, %v", n, err)
			}
			_ = conn.Close()
		}
	})
}
