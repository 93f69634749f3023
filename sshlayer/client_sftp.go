package sshlayer

import (
	"context"
	"fmt"
	"io"
	"io/fs"

	"github.com/pkg/sftp"

	"github.com/hostgate/hostgate"
)

// SFTP returns the filesystem provider over this connection's SFTP
// subsystem. One SFTP client is opened per Client, on first use, and closed
// with it; a failed open is retried on the next call. After the connection
// ended it fails with the reason (ErrClientClosed, ErrConnectionLost).
func (c *Client) SFTP(ctx context.Context) (hostgate.Provider, error) {
	if err := c.usable(); err != nil {
		return nil, fmt.Errorf("sshlayer: sftp: %w", err)
	}
	c.mu.Lock()
	if p := c.sftpProv; p != nil {
		c.mu.Unlock()
		return p, nil
	}
	c.mu.Unlock()
	sc, err := await(ctx, c, func() (*sftp.Client, error) {
		return sftp.NewClient(c.ssh, SFTPClientOptions()...)
	}, func(sc *sftp.Client) { _ = sc.Close() })
	if err != nil {
		return nil, c.opErr("sftp", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closing:
		_ = sc.Close()
		return nil, fmt.Errorf("sshlayer: sftp: %w", ErrClientClosed)
	case c.sftpProv != nil: // a concurrent first call won
		_ = sc.Close()
		return c.sftpProv, nil
	}
	c.sftpCli, c.sftpProv = sc, NewSFTPProvider(sc)
	return c.sftpProv, nil
}

// lazySFTP is the Connection's FS: it opens the SFTP client on first use so
// that hosts which only exec never start the subsystem.
type lazySFTP struct{ c *Client }

var _ hostgate.Provider = lazySFTP{}

func (l lazySFTP) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	p, err := l.c.SFTP(ctx)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return p.Stat(ctx, name)
}

func (l lazySFTP) Lstat(ctx context.Context, name string) (fs.FileInfo, error) {
	p, err := l.c.SFTP(ctx)
	if err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: err}
	}
	return p.Lstat(ctx, name)
}

func (l lazySFTP) ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	p, err := l.c.SFTP(ctx)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	return p.ReadDir(ctx, name)
}

func (l lazySFTP) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	p, err := l.c.SFTP(ctx)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return p.Open(ctx, name)
}

func (l lazySFTP) Create(ctx context.Context, name string, perm fs.FileMode) (io.WriteCloser, error) {
	p, err := l.c.SFTP(ctx)
	if err != nil {
		return nil, &fs.PathError{Op: "create", Path: name, Err: err}
	}
	return p.Create(ctx, name, perm)
}

func (l lazySFTP) Mkdir(ctx context.Context, name string, perm fs.FileMode, parents bool) error {
	p, err := l.c.SFTP(ctx)
	if err != nil {
		return &fs.PathError{Op: "mkdir", Path: name, Err: err}
	}
	return p.Mkdir(ctx, name, perm, parents)
}

func (l lazySFTP) Remove(ctx context.Context, name string, recursive bool) error {
	p, err := l.c.SFTP(ctx)
	if err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	return p.Remove(ctx, name, recursive)
}

func (l lazySFTP) Rename(ctx context.Context, oldname, newname string) error {
	p, err := l.c.SFTP(ctx)
	if err != nil {
		return &hostgate.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return p.Rename(ctx, oldname, newname)
}

func (l lazySFTP) Symlink(ctx context.Context, oldname, newname string) error {
	p, err := l.c.SFTP(ctx)
	if err != nil {
		return &hostgate.LinkError{Op: "symlink", Old: oldname, New: newname, Err: err}
	}
	return p.Symlink(ctx, oldname, newname)
}

func (l lazySFTP) Readlink(ctx context.Context, name string) (string, error) {
	p, err := l.c.SFTP(ctx)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: err}
	}
	return p.Readlink(ctx, name)
}

func (l lazySFTP) Realpath(ctx context.Context, name string) (string, error) {
	p, err := l.c.SFTP(ctx)
	if err != nil {
		return "", &fs.PathError{Op: "realpath", Path: name, Err: err}
	}
	return p.Realpath(ctx, name)
}

func (l lazySFTP) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	p, err := l.c.SFTP(ctx)
	if err != nil {
		return &fs.PathError{Op: "chmod", Path: name, Err: err}
	}
	return p.Chmod(ctx, name, mode)
}
