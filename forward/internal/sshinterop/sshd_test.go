package sshinterop

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/hostgate/hostgate/internal/sshdtest"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/sshlayer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// OpenSSH sshd as the peer, run by internal/sshdtest (one `sshd -i` per
// accepted connection). One cipher on both sides, so the comparison with
// `ssh -L` measures the forward and not the cipher choice.

type sshd struct{ *sshdtest.Server }

func startSSHD(t testing.TB) *sshd {
	t.Helper()
	return &sshd{sshdtest.Start(t, sshdtest.Options{LogLevel: "DEBUG1", Ciphers: "aes128-gcm@openssh.com"})}
}

// connect returns our SSH client to sshd, closed at cleanup.
func (s *sshd) connect(t testing.TB, ctx context.Context) *sshlayer.Client {
	t.Helper()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c, err := sshlayer.Connect(ctx, conn, sshlayer.Auth{User: "root", PrivateKey: s.UserKey, HostKey: s.HostKey})
	if err != nil {
		conn.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// sshL runs OpenSSH's `ssh -N -L` to sshd and returns the local address once
// ssh reports the forward listening (read from its -v output, no polling).
// The local port is picked by listening on :0 and closing, so ssh is retried
// when another process took the port in between.
func (s *sshd) sshL(t testing.TB, ctx context.Context, connect string) string {
	t.Helper()
	sshPath, err := exec.LookPath("ssh")
	testenv.RequirePeer(t, "OpenSSH ssh", err == nil)
	_, port, _ := net.SplitHostPort(s.Addr())
	for attempt := 0; attempt < 5; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		local := ln.Addr().String()
		ln.Close()
		cmd := exec.Command(sshPath, "-N", "-v", "-F", "/dev/null",
			"-o", "ExitOnForwardFailure=yes", "-o", "BatchMode=yes",
			"-o", "UserKnownHostsFile="+s.KnownHosts, "-o", "StrictHostKeyChecking=yes",
			"-o", "Ciphers=aes128-gcm@openssh.com",
			"-i", s.UserKeyFile, "-p", port, "-L", local+":"+connect, "root@127.0.0.1")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready := make(chan bool, 1)
		readerDone := make(chan struct{})
		var logMu sync.Mutex
		var log strings.Builder
		go func() {
			defer close(readerDone)
			buf := make([]byte, 4096)
			said := false
			for {
				n, err := stderr.Read(buf)
				logMu.Lock()
				log.Write(buf[:n])
				up := strings.Contains(log.String(), "Entering interactive session")
				logMu.Unlock()
				if up && !said {
					said = true
					ready <- true
				}
				if err != nil {
					if !said {
						ready <- false
					}
					return
				}
			}
		}()
		stop := func() {
			_ = cmd.Process.Kill()
			<-readerDone // the pipe must be drained before Wait closes it
			_ = cmd.Wait()
		}
		var ok bool
		select {
		case ok = <-ready:
		case <-ctx.Done():
		}
		if ok {
			t.Cleanup(stop)
			return local
		}
		stop()
		logMu.Lock()
		out := log.String()
		logMu.Unlock()
		if !strings.Contains(out, "Address already in use") {
			t.Fatalf("ssh -L failed:\n%s", out)
		}
	}
	t.Fatal("ssh -L: no free port after 5 attempts")
	return ""
}
