package syncfs

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/pkg/sftp"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/testenv"
)

// sftpServerPath is OpenSSH's SFTP server (Debian openssh-sftp-server): the
// server in another process that the seeds require for the synchronous
// bridge.
const sftpServerPath = "/usr/lib/openssh/sftp-server"

// server spawns one sftp-server child per connect and speaks SFTP over its
// stdin/stdout. It counts connects and keeps each child so tests can stop or
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
	cli, err := sftp.NewClientPipe(stdout, stdin)
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
	var p hostgate.Provider = sftpProvider{cli}
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

// sftpProvider is a minimal hostgate.Provider over *sftp.Client for these
// tests, mapping SFTP status errors to io/fs errors the way a provider must.
type sftpProvider struct{ c *sftp.Client }

var _ hostgate.Provider = sftpProvider{}

func perr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var st *sftp.StatusError
	if errors.As(err, &st) {
		switch st.FxCode() {
		case sftp.ErrSSHFxNoSuchFile:
			err = fs.ErrNotExist
		case sftp.ErrSSHFxPermissionDenied:
			err = fs.ErrPermission
		case sftp.ErrSSHFxOpUnsupported:
			err = hostgate.ErrNotSupported
		case sftp.ErrSSHFxFailure:
			// The server refused (a non-empty directory, …): an
			// answer, not a broken connection.
			err = syscall.EIO
		}
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

func (p sftpProvider) Stat(_ context.Context, name string) (fs.FileInfo, error) {
	fi, err := p.c.Stat(name)
	return fi, perr("stat", name, err)
}

func (p sftpProvider) Lstat(_ context.Context, name string) (fs.FileInfo, error) {
	fi, err := p.c.Lstat(name)
	return fi, perr("lstat", name, err)
}

func (p sftpProvider) ReadDir(_ context.Context, name string) ([]fs.DirEntry, error) {
	infos, err := p.c.ReadDir(name)
	if err != nil {
		return nil, perr("readdir", name, err)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name() < infos[j].Name() })
	out := make([]fs.DirEntry, len(infos))
	for i, fi := range infos {
		out[i] = fs.FileInfoToDirEntry(fi)
	}
	return out, nil
}

func (p sftpProvider) Open(_ context.Context, name string) (io.ReadCloser, error) {
	f, err := p.c.Open(name)
	if err != nil {
		return nil, perr("open", name, err)
	}
	return f, nil
}

func (p sftpProvider) Create(_ context.Context, name string, perm fs.FileMode) (io.WriteCloser, error) {
	f, err := p.c.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return nil, perr("create", name, err)
	}
	if err := f.Chmod(perm); err != nil {
		_ = f.Close()
		return nil, perr("create", name, err)
	}
	return f, nil
}

func (p sftpProvider) Mkdir(_ context.Context, name string, perm fs.FileMode, parents bool) error {
	var err error
	if parents {
		err = p.c.MkdirAll(name)
	} else if err = p.c.Mkdir(name); err != nil {
		if _, serr := p.c.Lstat(name); serr == nil {
			err = fs.ErrExist
		}
	}
	if err == nil {
		err = p.c.Chmod(name, perm)
	}
	return perr("mkdir", name, err)
}

func (p sftpProvider) Remove(_ context.Context, name string, recursive bool) error {
	if _, err := p.c.Lstat(name); err != nil {
		return perr("remove", name, err)
	}
	if recursive {
		return perr("remove", name, p.c.RemoveAll(name))
	}
	return perr("remove", name, p.c.Remove(name))
}

func (p sftpProvider) Rename(_ context.Context, oldname, newname string) error {
	return perr("rename", oldname, p.c.PosixRename(oldname, newname))
}

func (p sftpProvider) Symlink(_ context.Context, oldname, newname string) error {
	return perr("symlink", newname, p.c.Symlink(oldname, newname))
}

func (p sftpProvider) Readlink(_ context.Context, name string) (string, error) {
	s, err := p.c.ReadLink(name)
	return s, perr("readlink", name, err)
}

func (p sftpProvider) Realpath(_ context.Context, name string) (string, error) {
	s, err := p.c.RealPath(name)
	return s, perr("realpath", name, err)
}

func (p sftpProvider) Chmod(_ context.Context, name string, mode fs.FileMode) error {
	return perr("chmod", name, p.c.Chmod(name, mode))
}
