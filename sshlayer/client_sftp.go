package sshlayer

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"

	"github.com/hostgate/hostgate"
)

// SFTP returns the filesystem provider over this connection's SFTP
// subsystem. One SFTP session at a time is open per Client, opened on first
// use and closed with it; a failed open is retried on the next call. When
// the session ends while the connection stays up (the server's sftp-server
// was killed, or quit on a request), the call that was under way fails with
// ErrSFTPSessionEnded and the provider's next call opens a new session.
// After the connection ended it fails with the reason (ErrClientClosed,
// ErrConnectionLost).
func (c *Client) SFTP(ctx context.Context) (hostgate.Provider, error) {
	if _, err := c.sftpSession(ctx); err != nil {
		return nil, err
	}
	return lazySFTP{c}, nil
}

// sftpSession is one SFTP subsystem session of a Client.
type sftpSession struct {
	cli  *sftp.Client
	prov *sftpProvider
	// done is closed by watchSFTP when the session has ended. (pkg/sftp
	// does not tell how the server's subsystem exited: its Wait says EOF.)
	done chan struct{}
}

// sftpSession returns the client's open SFTP session, opening one when
// there is none or the last one ended.
func (c *Client) sftpSession(ctx context.Context) (*sftpSession, error) {
	if err := c.usable(); err != nil {
		return nil, fmt.Errorf("sshlayer: sftp: %w", err)
	}
	c.mu.Lock()
	if s := c.liveSFTP(); s != nil {
		c.mu.Unlock()
		return s, nil
	}
	c.mu.Unlock()
	sc, err := await(ctx, c, c.newSFTPClient, func(sc *sftp.Client) { _ = sc.Close() })
	if err != nil {
		return nil, c.opErr("sftp", err)
	}
	// A session not kept is closed without c.mu: its close may wait on
	// the host (to send its EOF and CLOSE on a connection the host
	// stopped reading; before pkg/sftp's change 32, for the host to end
	// the session), and a host that stopped answering would keep Close
	// (and the keepalive, which would end the connection) waiting on c.mu
	// for ever.
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		_ = sc.Close() // returns once Close has closed the connection
		return nil, fmt.Errorf("sshlayer: sftp: %w", ErrClientClosed)
	}
	if s := c.liveSFTP(); s != nil { // a concurrent call won
		c.wg.Add(1) // as track does; c.mu is held and Close has not started
		c.mu.Unlock()
		go func() {
			defer c.wg.Done()
			_ = sc.Close()
		}()
		return s, nil
	}
	s := &sftpSession{cli: sc, done: make(chan struct{})}
	s.prov = newSFTPProvider(sc, func() error { return c.sftpEnded(s) })
	s.prov.namesErrno = c.sftpErrno
	c.sftp = s
	c.wg.Add(1) // as track does; c.mu is held and Close has not started
	go c.watchSFTP(s)
	c.mu.Unlock()
	return s, nil
}

// newSFTPClient starts an SFTP session on the spare session channel, when
// one is open or about to be (takeSpareWait), else on a new one; its
// subsystem request and the SFTP init go out together (pkg/sftp change
// 24). A first filesystem call then takes two round trips where it took
// four: the channel's open, the request's reply and the init's were each
// waited for before the call went out.
func (c *Client) newSFTPClient() (*sftp.Client, error) {
	sess, spare := c.takeSpareWait()
	if sess == nil {
		var err error
		if sess, err = c.newSession(); err != nil {
			return nil, err
		}
	}
	c.refillSpare() // after the session's own channel, as start's
	sc, err := sftp.NewClientSession(sess, SFTPClientOptions()...)
	if err != nil && spare && c.usable() == nil {
		// The spare may have gone stale (the server closed it), as
		// startOn retries.
		if sess, err = c.newSession(); err != nil {
			return nil, err
		}
		sc, err = sftp.NewClientSession(sess, SFTPClientOptions()...)
	}
	return sc, err
}

// liveSFTP returns the cached session unless it has ended, which it drops;
// c.mu must be held.
func (c *Client) liveSFTP() *sftpSession {
	s := c.sftp
	if s == nil {
		return nil
	}
	select {
	case <-s.done:
		c.sftp = nil
		return nil
	default:
		return s
	}
}

// watchSFTP waits for s to end, marks it ended, and closes its client, so an
// ended session leaves nothing behind whoever notices first.
func (c *Client) watchSFTP(s *sftpSession) {
	defer c.wg.Done()
	_ = s.cli.Wait()
	_ = s.cli.Close()
	close(s.done)
	c.mu.Lock()
	if c.sftp == s {
		c.sftp = nil
	}
	c.mu.Unlock()
}

// sftpEnded is the error of a call that found s ended: the connection's
// end when that is what ended it, else an *sftpEndedError. The session is
// dropped at once, so the next call opens a new one even before watchSFTP
// has seen the end.
func (c *Client) sftpEnded(s *sftpSession) error {
	c.mu.Lock()
	if c.sftp == s {
		c.sftp = nil
	}
	c.mu.Unlock()
	if lost := c.lostErr(); lost != nil {
		return fmt.Errorf("sshlayer: sftp: %w", lost)
	}
	return &sftpEndedError{reopens: true}
}

// lazySFTP is the Connection's FS: it opens the SFTP client on first use so
// that hosts which only exec never start the subsystem.
type lazySFTP struct{ c *Client }

var (
	_ hostgate.Provider   = lazySFTP{}
	_ hostgate.FileReader = lazySFTP{}
	_ hostgate.FileWriter = lazySFTP{}
	_ hostgate.TimeSetter = lazySFTP{}
)

func (l lazySFTP) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	s, err := l.c.sftpSession(ctx)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	return s.prov.Stat(ctx, name)
}

func (l lazySFTP) Lstat(ctx context.Context, name string) (fs.FileInfo, error) {
	s, err := l.c.sftpSession(ctx)
	if err != nil {
		return nil, &fs.PathError{Op: "lstat", Path: name, Err: err}
	}
	return s.prov.Lstat(ctx, name)
}

func (l lazySFTP) ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	s, err := l.c.sftpSession(ctx)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	return s.prov.ReadDir(ctx, name)
}

func (l lazySFTP) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	s, err := l.c.sftpSession(ctx)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return s.prov.Open(ctx, name)
}

func (l lazySFTP) Create(ctx context.Context, name string, perm fs.FileMode) (io.WriteCloser, error) {
	s, err := l.c.sftpSession(ctx)
	if err != nil {
		return nil, &fs.PathError{Op: "create", Path: name, Err: err}
	}
	return s.prov.Create(ctx, name, perm)
}

// ReadFile and WriteFile forward the SFTP provider's whole-file calls, as
// the rest does: without them the synchronous filesystem would go through
// Open and Create, twice the round trips.
func (l lazySFTP) ReadFile(ctx context.Context, name string, progress func()) ([]byte, error) {
	s, err := l.c.sftpSession(ctx)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return s.prov.ReadFile(ctx, name, progress)
}

func (l lazySFTP) WriteFile(ctx context.Context, name string, perm fs.FileMode, r io.Reader, progress func()) error {
	s, err := l.c.sftpSession(ctx)
	if err != nil {
		return &fs.PathError{Op: "create", Path: name, Err: err}
	}
	return s.prov.WriteFile(ctx, name, perm, r, progress)
}

func (l lazySFTP) Mkdir(ctx context.Context, name string, perm fs.FileMode, parents bool) error {
	s, err := l.c.sftpSession(ctx)
	if err != nil {
		return &fs.PathError{Op: "mkdir", Path: name, Err: err}
	}
	return s.prov.Mkdir(ctx, name, perm, parents)
}

func (l lazySFTP) Remove(ctx context.Context, name string, recursive bool) error {
	s, err := l.c.sftpSession(ctx)
	if err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	return s.prov.Remove(ctx, name, recursive)
}

func (l lazySFTP) Rename(ctx context.Context, oldname, newname string) error {
	s, err := l.c.sftpSession(ctx)
	if err != nil {
		return &hostgate.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return s.prov.Rename(ctx, oldname, newname)
}

func (l lazySFTP) Symlink(ctx context.Context, oldname, newname string) error {
	s, err := l.c.sftpSession(ctx)
	if err != nil {
		return &hostgate.LinkError{Op: "symlink", Old: oldname, New: newname, Err: err}
	}
	return s.prov.Symlink(ctx, oldname, newname)
}

func (l lazySFTP) Readlink(ctx context.Context, name string) (string, error) {
	s, err := l.c.sftpSession(ctx)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: err}
	}
	return s.prov.Readlink(ctx, name)
}

func (l lazySFTP) Realpath(ctx context.Context, name string) (string, error) {
	s, err := l.c.sftpSession(ctx)
	if err != nil {
		return "", &fs.PathError{Op: "realpath", Path: name, Err: err}
	}
	return s.prov.Realpath(ctx, name)
}

func (l lazySFTP) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	s, err := l.c.sftpSession(ctx)
	if err != nil {
		return &fs.PathError{Op: "chmod", Path: name, Err: err}
	}
	return s.prov.Chmod(ctx, name, mode)
}

func (l lazySFTP) Chtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	s, err := l.c.sftpSession(ctx)
	if err != nil {
		return &fs.PathError{Op: "chtimes", Path: name, Err: err}
	}
	return s.prov.Chtimes(ctx, name, atime, mtime)
}

func (l lazySFTP) Lchtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	s, err := l.c.sftpSession(ctx)
	if err != nil {
		return &fs.PathError{Op: "lchtimes", Path: name, Err: err}
	}
	return s.prov.Lchtimes(ctx, name, atime, mtime)
}
