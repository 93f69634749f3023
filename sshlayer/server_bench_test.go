//go:build linux

package sshlayer

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/ssh"

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
