package sshlayer

import (
	"context"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/pkg/sftp"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/providertest"
)

const sftpServerBin = "/usr/lib/openssh/sftp-server"

// startSFTPServer runs OpenSSH's sftp-server as a child process speaking
// SFTP over its stdin and stdout: a real peer in another process.
func startSFTPServer(tb testing.TB) *sftp.Client {
	tb.Helper()
	_, err := os.Stat(sftpServerBin)
	testenv.RequirePeer(tb, "OpenSSH sftp-server", err == nil)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, sftpServerBin, "-e", "-l", "ERROR")
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = testLogWriter{tb}
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	c, err := sftp.NewClientPipe(out, in, SFTPClientOptions()...)
	if err != nil {
		cancel()
		_ = cmd.Wait()
		tb.Fatalf("sftp handshake: %v", err)
	}
	tb.Cleanup(func() {
		_ = c.Close() // closes stdin: sftp-server exits on EOF
		if err := cmd.Wait(); err != nil {
			tb.Errorf("sftp-server: %v", err)
		}
		cancel()
	})
	return c
}

type testLogWriter struct{ tb testing.TB }

func (w testLogWriter) Write(b []byte) (int, error) {
	w.tb.Logf("sftp-server: %s", b)
	return len(b), nil
}

func TestSFTPProviderConformance(t *testing.T) {
	providertest.Run(t, func(t *testing.T) (hostgate.Provider, string) {
		return NewSFTPProvider(startSFTPServer(t)), t.TempDir()
	})
}

var _ io.ReaderFrom = (*sftpWriter)(nil)
var _ io.WriterTo = (*sftpReader)(nil)
