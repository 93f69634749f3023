package syncfs

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/sshlayer"
)

// sftpServerPath is OpenSSH's SFTP server (Debian openssh-sftp-server): the
// server in another process that the seeds require for the synchronous
// bridge.
const sftpServerPath = "/usr/lib/openssh/sftp-server"

// server spawns one sftp-server child per connect and speaks SFTP over its
// stdin/stdout through sshlayer's SFTP provider. It counts connects and keeps each child so tests can stop or
// kill it.
type server struct {
	t        testing.TB
	connects atomic.Int32
	// wrap, when set, wraps each connection's provider.
	wrap func(hostgate.Provider) hostgate.Provider

	mu       sync.Mutex
	children []*child
}

type child struct {
	cmd *exec.Cmd
	cli *sftp.Client
}

func newServer(t testing.TB) *server {
	t.Helper()
	_, err := os.Stat(sftpServerPath)
	testenv.RequirePeer(t, "sftp-server ("+sftpServerPath+")", err == nil)
	return &server{t: t}
}

func (sv *server) spec() *hostgate.SyncSpec {
	return &hostgate.SyncSpec{Connect: sv.connect}
}

func (sv *server) connect(ctx context.Context) (*hostgate.SyncConnection, error) {
	sv.connects.Add(1)
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
	// The SFTP handshake takes no ctx: killing the child ends it.
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
	cli, err := sftp.NewClientPipe(stdout, stdin, sshlayer.SFTPClientOptions()...)
	stop()
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	ch := &child{cmd: cmd, cli: cli}
	sv.mu.Lock()
	sv.children = append(sv.children, ch)
	sv.mu.Unlock()
	var p = sshlayer.NewSFTPProvider(cli)
	if sv.wrap != nil {
		p = sv.wrap(p)
	}
	return &hostgate.SyncConnection{FS: p, Close: func() error {
		// Kill first: a stopped child never answers the client's close.
		_ = cmd.Process.Kill()
		_ = cli.Close()
		err := cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return nil // killed, as asked
		}
		return err
	}}, nil
}

// last returns the most recent child.
func (sv *server) last() *child {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if len(sv.children) == 0 {
		sv.t.Fatal("no sftp-server child yet")
	}
	return sv.children[len(sv.children)-1]
}
