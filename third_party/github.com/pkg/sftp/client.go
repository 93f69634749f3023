package sftp

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
	"github.com/kr/fs"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp/internal/encoding/ssh/filexfer/openssh"
)

var (
	// ErrInternalInconsistency indicates the packets sent and the data queued to be
	// written to the file don't match up. It is an unusual error and usually is
	// caused by bad behavior server side or connection issues. The error is
	// limited in scope to the call where it happened, the client object is still
	// OK to use as long as the connection is still open.
	ErrInternalInconsistency = errors.New("internal inconsistency")
	// InternalInconsistency alias for ErrInternalInconsistency.
	//
	// Deprecated: please use ErrInternalInconsistency
	InternalInconsistency = ErrInternalInconsistency
)

// A ClientOption is a function which applies configuration to a Client.
type ClientOption func(*Client) error

// MaxPacketChecked sets the maximum size of the payload, measured in bytes.
// This option only accepts sizes servers should support, ie. <= 32768 bytes.
//
// If you get the error "failed to send packet header: EOF" when copying a
// large file, try lowering this number.
//
// The default packet size is 32768 bytes.
func MaxPacketChecked(size int) ClientOption {
	return func(c *Client) error {
		if size < 1 {
			return errors.New("size must be greater or equal to 1")
		}
		if size > 32768 {
			return errors.New("sizes larger than 32KB might not work with all servers")
		}
		c.maxPacket = size
		return nil
	}
}

// MaxPacketUnchecked sets the maximum size of the payload, measured in bytes.
// It accepts sizes larger than the 32768 bytes all servers should support.
// Only use a setting higher than 32768 if your application always connects to
// the same server or after sufficiently broad testing.
//
// If you get the error "failed to send packet header: EOF" when copying a
// large file, try lowering this number.
//
// The default packet size is 32768 bytes.
func MaxPacketUnchecked(size int) ClientOption {
	return func(c *Client) error {
		if size < 1 {
			return errors.New("size must be greater or equal to 1")
		}
		c.maxPacket = size
		return nil
	}
}

// MaxPacket sets the maximum size of the payload, measured in bytes.
// This option only accepts sizes servers should support, ie. <= 32768 bytes.
// This is a synonym for MaxPacketChecked that provides backward compatibility.
//
// If you get the error "failed to send packet header: EOF" when copying a
// large file, try lowering this number.
//
// The default packet size is 32768 bytes.
func MaxPacket(size int) ClientOption {
	return MaxPacketChecked(size)
}

// MaxConcurrentRequestsPerFile sets the maximum concurrent requests allowed for a single file.
//
// The default maximum concurrent requests is 64.
func MaxConcurrentRequestsPerFile(n int) ClientOption {
	return func(c *Client) error {
		if n < 1 {
			return errors.New("n must be greater or equal to 1")
		}
		c.maxConcurrentRequests = n
		return nil
	}
}

// UseConcurrentWrites allows the Client to perform concurrent Writes.
//
// Using concurrency while doing writes, requires special consideration.
// A write to a later offset in a file after an error,
// could end up with a file length longer than what was successfully written.
//
// When using this option, if you receive an error during `io.Copy` or `io.WriteTo`,
// you may need to `Truncate` the target Writer to avoid “holes” in the data written.
func UseConcurrentWrites(value bool) ClientOption {
	return func(c *Client) error {
		c.useConcurrentWrites = value
		return nil
	}
}

// UseConcurrentReads allows the Client to perform concurrent Reads.
//
// Concurrent reads are generally safe to use and not using them will degrade
// performance, so this option is enabled by default.
//
// When enabled, WriteTo will use Stat/Fstat to get the file size and determines
// how many concurrent workers to use.
// Some "read once" servers will delete the file if they receive a stat call on an
// open file and then the download will fail.
// Disabling concurrent reads you will be able to download files from these servers.
// If concurrent reads are disabled, the UseFstat option is ignored.
func UseConcurrentReads(value bool) ClientOption {
	return func(c *Client) error {
		c.disableConcurrentReads = !value
		return nil
	}
}

// UseFstat sets whether to use Fstat or Stat when File.WriteTo is called
// (usually when copying files).
// Some servers limit the amount of open files and calling Stat after opening
// the file will throw an error From the server. Setting this flag will call
// Fstat instead of Stat which is suppose to be called on an open file handle.
//
// It has been found that that with IBM Sterling SFTP servers which have
// "extractability" level set to 1 which means only 1 file can be opened at
// any given time.
//
// If the server you are working with still has an issue with both Stat and
// Fstat calls you can always open a file and read it until the end.
//
// Another reason to read the file until its end and Fstat doesn't work is
// that in some servers, reading a full file will automatically delete the
// file as some of these mainframes map the file to a message in a queue.
// Once the file has been read it will get deleted.
func UseFstat(value bool) ClientOption {
	return func(c *Client) error {
		c.useFstat = value
		return nil
	}
}

// CopyStderrTo specifies a writer to which the standard error of the remote sftp-server command should be written.
//
// The writer passed in will not be automatically closed.
// It is the responsibility of the caller to coordinate closure of any writers.
func CopyStderrTo(wr io.Writer) ClientOption {
	return func(c *Client) error {
		c.stderrTo = wr
		return nil
	}
}

// Client represents an SFTP session on a *ssh.ClientConn SSH connection.
// Multiple Clients can be active on a single SSH connection, and a Client
// may be called concurrently from multiple Goroutines.
//
// Client implements the github.com/kr/fs.FileSystem interface.
type Client struct {
	clientConn

	stderrTo io.Writer

	ext map[string]string // Extensions (name -> data).

	maxPacket             int // max packet size read or written.
	maxConcurrentRequests int
	nextid                uint32

	// write concurrency is… error prone.
	// Default behavior should be to not use it.
	useConcurrentWrites    bool
	useFstat               bool
	disableConcurrentReads bool

	sizes sizes // hostgate (change 8): the request sizes the server takes
}

// NewClient creates a new SFTP client on conn, using zero or more option
// functions.
func NewClient(conn *ssh.Client, opts ...ClientOption) (*Client, error) {
	s, err := conn.NewSession()
	if err != nil {
		return nil, err
	}

	pw, err := s.StdinPipe()
	if err != nil {
		return nil, err
	}
	pr, err := s.StdoutPipe()
	if err != nil {
		return nil, err
	}
	perr, err := s.StderrPipe()
	if err != nil {
		return nil, err
	}

	if err := s.RequestSubsystem("sftp"); err != nil {
		return nil, err
	}

	return newClientPipe(pr, perr, pw, s.Wait, opts...)
}

// NewClientPipe creates a new SFTP client given a Reader and a WriteCloser.
// This can be used for connecting to an SFTP server over TCP/TLS or by using
// the system's ssh client program (e.g. via exec.Command).
func NewClientPipe(rd io.Reader, wr io.WriteCloser, opts ...ClientOption) (*Client, error) {
	return newClientPipe(rd, nil, wr, nil, opts...)
}

func newClientPipe(rd, stderr io.Reader, wr io.WriteCloser, wait func() error, opts ...ClientOption) (*Client, error) {
	c := &Client{
		clientConn: clientConn{
			conn: conn{
				Reader:      rd,
				WriteCloser: wr,
				sendMu:      newSendLock(),
			},
			inflight: make(map[uint32]inflightReq),
			closed:   make(chan struct{}),
			wait:     wait,
		},

		ext: make(map[string]string),

		maxPacket:             1 << 15,
		maxConcurrentRequests: 64,
	}

	for _, opt := range opts {
		if err := opt(c); err != nil {
			wr.Close()
			return nil, err
		}
	}

	if stderr != nil {
		wr := io.Discard
		if c.stderrTo != nil {
			wr = c.stderrTo
		}

		go func() {
			// DO NOT close the writer!
			// Programs may pass in `os.Stderr` to write the remote stderr to,
			// and the program may continue after disconnect by reconnecting.
			// But if we've closed their stderr, then we just messed everything up.

			if _, err := io.Copy(wr, stderr); err != nil {
				debug("error copying stderr: %v", err)
			}
		}()
	}

	if err := c.sendInit(); err != nil {
		wr.Close()
		return nil, fmt.Errorf("error sending init packet to server: %w", err)
	}

	if err := c.recvVersion(); err != nil {
		wr.Close()
		return nil, fmt.Errorf("error receiving version packet from server: %w", err)
	}

	c.clientConn.wg.Add(1)
	go func() {
		defer c.clientConn.wg.Done()

		if err := c.clientConn.recv(); err != nil {
			c.clientConn.broadcastErr(err)
		}
	}()
	c.askLimits() // hostgate (change 8)

	return c, nil
}

// Create creates the named file mode 0666 (before umask), truncating it if it
// already exists. If successful, methods on the returned File can be used for
// I/O; the associated file descriptor has mode O_RDWR. If you need more
// control over the flags/mode used to open the file see client.OpenFile.
//
// Note that some SFTP servers (eg. AWS Transfer) do not support opening files
// read/write at the same time. For those services you will need to use
// `client.OpenFile(os.O_WRONLY|os.O_CREATE|os.O_TRUNC)`.
func (c *Client) Create(path string) (*File, error) {
	return c.open(path, toPflags(os.O_RDWR|os.O_CREATE|os.O_TRUNC))
}

const sftpProtocolVersion = 3 // https://filezilla-project.org/specs/draft-ietf-secsh-filexfer-02.txt

func (c *Client) sendInit() error {
	return c.clientConn.conn.sendPacket(&sshFxInitPacket{
		Version: sftpProtocolVersion, // https://filezilla-project.org/specs/draft-ietf-secsh-filexfer-02.txt
	})
}

// returns the next value of c.nextid
func (c *Client) nextID() uint32 {
	return atomic.AddUint32(&c.nextid, 1)
}

func (c *Client) recvVersion() error {
	typ, data, err := c.recvPacket(0)
	if err != nil {
		if err == io.EOF {
			return fmt.Errorf("server unexpectedly closed connection: %w", io.ErrUnexpectedEOF)
		}

		return err
	}

	if typ != sshFxpVersion {
		return &unexpectedPacketErr{sshFxpVersion, typ}
	}

	version, data, err := unmarshalUint32Safe(data)
	if err != nil {
		return err
	}

	if version != sftpProtocolVersion {
		return &unexpectedVersionErr{sftpProtocolVersion, version}
	}

	for len(data) > 0 {
		var ext extensionPair
		ext, data, err = unmarshalExtensionPair(data)
		if err != nil {
			return err
		}
		c.ext[ext.Name] = ext.Data
	}

	return nil
}

// HasExtension checks whether the server supports a named extension.
//
// The first return value is the extension data reported by the server
// (typically a version number).
func (c *Client) HasExtension(name string) (string, bool) {
	data, ok := c.ext[name]
	return data, ok
}

// Walk returns a new Walker rooted at root.
func (c *Client) Walk(root string) *fs.Walker {
	return fs.WalkFS(root, c)
}

// ReadDir reads the directory named by p
// and returns a list of directory entries.
func (c *Client) ReadDir(p string) ([]os.FileInfo, error) {
	return c.ReadDirContext(context.Background(), p)
}

// ReadDirContext reads the directory named by p
// and returns a list of directory entries.
// The passed context can be used to cancel the operation
// returning all entries listed up to the cancellation.
func (c *Client) ReadDirContext(ctx context.Context, p string) ([]os.FileInfo, error) {
	return c.ReadDirProgress(ctx, p, nil)
}

// ReadDirProgress is ReadDirContext calling progress, when not nil, as
// each page of the listing arrives (hostgate: change 38).
func (c *Client) ReadDirProgress(ctx context.Context, p string, progress func()) ([]os.FileInfo, error) {
	handle, err := c.opendir(ctx, p)
	if err != nil {
		return nil, err
	}
	// hostgate (change 28): the close's reply is waited for no longer
	// than ctx; its error was never returned. A host that answered the
	// listing but not the close held the call until the connection ended.
	defer c.close(ctx, handle) // this has to defer earlier than the lock below
	var entries []os.FileInfo
	budget := dirBudget{dir: p} // hostgate: change 36
	var done = false
	for !done {
		id := c.nextID()
		typ, data, err1 := c.sendPacket(ctx, nil, &sshFxpReaddirPacket{
			ID:     id,
			Handle: handle,
		})
		if err1 != nil {
			err = err1
			done = true
			break
		}
		switch typ {
		case sshFxpName:
			data, err = unmarshalSID(id, data)
			if err != nil {
				return nil, err
			}
			// hostgate (change 38): a page came, for a caller whose
			// timeout bounds each answer rather than the listing.
			if progress != nil {
				progress()
			}
			var count int
			count, data, err = unmarshalCount(data)
			if err != nil {
				return nil, err
			}
			if count == 0 {
				// hostgate (change 36): a reply of no names counts
				// one, or a server sending them for ever is never
				// bounded.
				if err := budget.take(1, 0); err != nil {
					return nil, err
				}
			}
			for range count {
				start := len(data)
				var filename, longname string
				filename, data, err = unmarshalStringSafe(data)
				if err != nil {
					return nil, err
				}
				longname, data, err = unmarshalStringSafe(data) // discard longname
				if err != nil {
					return nil, err
				}
				var attr *FileStat
				attr, data, err = unmarshalAttrs(data)
				if err != nil {
					return nil, err
				}
				// hostgate (change 36): "." and ".." count too, as
				// every name a listing sends.
				if err := budget.take(1, start-len(data)-len(longname)); err != nil {
					return nil, err
				}
				if filename == "." || filename == ".." {
					continue
				}
				entries = append(entries, fileInfoFromStat(attr, path.Base(filename)))
			}
		case sshFxpStatus:
			// TODO(dfc) scope warning!
			err = normaliseError(unmarshalStatus(id, data))
			done = true
		default:
			return nil, unimplementedPacketErr(typ)
		}
	}
	if err == io.EOF {
		err = nil
	}
	return entries, err
}

func (c *Client) opendir(ctx context.Context, path string) (string, error) {
	id := c.nextID()
	typ, data, err := c.sendPacket(ctx, nil, &sshFxpOpendirPacket{
		ID:   id,
		Path: path,
	})
	if err != nil {
		return "", err
	}
	switch typ {
	case sshFxpHandle:
		data, err := unmarshalSID(id, data)
		if err != nil {
			return "", err
		}
		handle, _, err := unmarshalStringSafe(data)
		if err != nil {
			return "", err
		}
		return handle, nil
	case sshFxpStatus:
		return "", normaliseError(unmarshalStatus(id, data))
	default:
		return "", unimplementedPacketErr(typ)
	}
}

// Stat returns a FileInfo structure describing the file specified by path 'p'.
// If 'p' is a symbolic link, the returned FileInfo structure describes the referent file.
func (c *Client) Stat(p string) (os.FileInfo, error) {
	return c.StatContext(context.Background(), p)
}

// StatContext is Stat, returning ctx's error as soon as ctx ends before
// the answer (hostgate: change 14).
func (c *Client) StatContext(ctx context.Context, p string) (os.FileInfo, error) {
	fs, err := c.statContext(ctx, p)
	if err != nil {
		return nil, err
	}
	return fileInfoFromStat(fs, path.Base(p)), nil
}

// Lstat returns a FileInfo structure describing the file specified by path 'p'.
// If 'p' is a symbolic link, the returned FileInfo structure describes the symbolic link.
func (c *Client) Lstat(p string) (os.FileInfo, error) {
	return c.LstatContext(context.Background(), p)
}

// LstatContext is Lstat, returning ctx's error as soon as ctx ends before
// the answer (hostgate: change 14).
func (c *Client) LstatContext(ctx context.Context, p string) (os.FileInfo, error) {
	id := c.nextID()
	typ, data, err := c.sendPacket(ctx, nil, &sshFxpLstatPacket{
		ID:   id,
		Path: p,
	})
	if err != nil {
		return nil, err
	}
	switch typ {
	case sshFxpAttrs:
		data, err := unmarshalSID(id, data)
		if err != nil {
			return nil, err
		}
		attr, _, err := unmarshalAttrs(data)
		if err != nil {
			// avoid returning a valid value from fileInfoFromStats if err != nil.
			return nil, err
		}
		return fileInfoFromStat(attr, path.Base(p)), nil
	case sshFxpStatus:
		return nil, normaliseError(unmarshalStatus(id, data))
	default:
		return nil, unimplementedPacketErr(typ)
	}
}

// ReadLink reads the target of a symbolic link.
func (c *Client) ReadLink(p string) (string, error) {
	return c.ReadLinkContext(context.Background(), p)
}

// ReadLinkContext is ReadLink whose request is sent only while ctx has not
// ended and waited for no longer than ctx (hostgate: change 33).
func (c *Client) ReadLinkContext(ctx context.Context, p string) (string, error) {
	id := c.nextID()
	typ, data, err := c.sendPacket(ctx, nil, &sshFxpReadlinkPacket{
		ID:   id,
		Path: p,
	})
	if err != nil {
		return "", err
	}
	switch typ {
	case sshFxpName:
		data, err := unmarshalSID(id, data)
		if err != nil {
			return "", err
		}
		count, data, err := unmarshalCount(data)
		if err != nil {
			return "", err
		}
		if count != 1 {
			return "", unexpectedCount(1, uint32(count))
		}
		filename, _, err := unmarshalStringSafe(data) // ignore dummy attributes
		if err != nil {
			return "", err
		}
		return filename, nil
	case sshFxpStatus:
		return "", normaliseError(unmarshalStatus(id, data))
	default:
		return "", unimplementedPacketErr(typ)
	}
}

// Link creates a hard link at 'newname', pointing at the same inode as 'oldname'
func (c *Client) Link(oldname, newname string) error {
	id := c.nextID()
	typ, data, err := c.sendPacket(context.Background(), nil, &sshFxpHardlinkPacket{
		ID:      id,
		Oldpath: oldname,
		Newpath: newname,
	})
	if err != nil {
		return err
	}
	switch typ {
	case sshFxpStatus:
		return normaliseError(unmarshalStatus(id, data))
	default:
		return unimplementedPacketErr(typ)
	}
}

// Symlink creates a symbolic link at 'newname', pointing at target 'oldname'
func (c *Client) Symlink(oldname, newname string) error {
	return c.SymlinkContext(context.Background(), oldname, newname)
}

// SymlinkContext is Symlink whose request is sent only while ctx has not
// ended and waited for no longer than ctx (hostgate: change 33).
func (c *Client) SymlinkContext(ctx context.Context, oldname, newname string) error {
	id := c.nextID()
	typ, data, err := c.sendPacket(ctx, nil, &sshFxpSymlinkPacket{
		ID:         id,
		Linkpath:   newname,
		Targetpath: oldname,
	})
	if err != nil {
		return err
	}
	switch typ {
	case sshFxpStatus:
		return normaliseError(unmarshalStatus(id, data))
	default:
		return unimplementedPacketErr(typ)
	}
}

// hostgate (change 15): owner is the File whose handle it is, whose Abort
// fails the request.
func (c *Client) fsetstat(owner *File, handle string, flags uint32, attrs any) error {
	id := c.nextID()
	typ, data, err := c.sendPacketFor(context.Background(), owner, nil, &sshFxpFsetstatPacket{
		ID:     id,
		Handle: handle,
		Flags:  flags,
		Attrs:  attrs,
	})
	if err != nil {
		return err
	}
	switch typ {
	case sshFxpStatus:
		return normaliseError(unmarshalStatus(id, data))
	default:
		return unimplementedPacketErr(typ)
	}
}

// setstat is a convience wrapper to allow for changing of various parts of the file descriptor.
func (c *Client) setstat(path string, flags uint32, attrs any) error {
	return c.setstatContext(context.Background(), path, flags, attrs)
}

// setstatContext is setstat, returning ctx's error as soon as ctx ends
// before the answer (hostgate: change 30).
func (c *Client) setstatContext(ctx context.Context, path string, flags uint32, attrs any) error {
	id := c.nextID()
	typ, data, err := c.sendPacket(ctx, nil, &sshFxpSetstatPacket{
		ID:    id,
		Path:  path,
		Flags: flags,
		Attrs: attrs,
	})
	if err != nil {
		return err
	}
	switch typ {
	case sshFxpStatus:
		return normaliseError(unmarshalStatus(id, data))
	default:
		return unimplementedPacketErr(typ)
	}
}

// Chtimes changes the access and modification times of the named file.
func (c *Client) Chtimes(path string, atime time.Time, mtime time.Time) error {
	return c.ChtimesContext(context.Background(), path, atime, mtime)
}

// ChtimesContext is Chtimes, returning ctx's error as soon as ctx ends
// before the answer (hostgate: change 30). As Chtimes, it sends each time
// as SFTP version 3 has it, seconds in 32 bits: times before 1970 or
// after 2106 wrap, so a caller checks them first.
func (c *Client) ChtimesContext(ctx context.Context, path string, atime time.Time, mtime time.Time) error {
	type times struct {
		Atime uint32
		Mtime uint32
	}
	attrs := times{uint32(atime.Unix()), uint32(mtime.Unix())}
	return c.setstatContext(ctx, path, sshFileXferAttrACmodTime, attrs)
}

// Chown changes the user and group owners of the named file.
func (c *Client) Chown(path string, uid, gid int) error {
	type owner struct {
		UID uint32
		GID uint32
	}
	attrs := owner{uint32(uid), uint32(gid)}
	return c.setstat(path, sshFileXferAttrUIDGID, attrs)
}

// Chmod changes the permissions of the named file.
//
// Chmod does not apply a umask, because even retrieving the umask is not
// possible in a portable way without causing a race condition. Callers
// should mask off umask bits, if desired.
func (c *Client) Chmod(path string, mode os.FileMode) error {
	return c.ChmodContext(context.Background(), path, mode)
}

// ChmodContext is Chmod whose request is sent only while ctx has not
// ended and waited for no longer than ctx (hostgate: change 33).
func (c *Client) ChmodContext(ctx context.Context, path string, mode os.FileMode) error {
	return c.setstatContext(ctx, path, sshFileXferAttrPermissions, toChmodPerm(mode))
}

// Truncate sets the size of the named file. Although it may be safely assumed
// that if the size is less than its current size it will be truncated to fit,
// the SFTP protocol does not specify what behavior the server should do when setting
// size greater than the current size.
func (c *Client) Truncate(path string, size int64) error {
	return c.setstat(path, sshFileXferAttrSize, uint64(size))
}

// SetExtendedData sets extended attributes of the named file. It uses the
// SSH_FILEXFER_ATTR_EXTENDED flag in the setstat request.
//
// This flag provides a general extension mechanism for vendor-specific extensions.
// Names of the attributes should be a string of the format "name@domain", where "domain"
// is a valid, registered domain name and "name" identifies the method. Server
// implementations SHOULD ignore extended data fields that they do not understand.
func (c *Client) SetExtendedData(path string, extended []StatExtended) error {
	attrs := &FileStat{
		Extended: extended,
	}
	return c.setstat(path, sshFileXferAttrExtended, attrs)
}

// Open opens the named file for reading. If successful, methods on the
// returned file can be used for reading; the associated file descriptor
// has mode O_RDONLY.
func (c *Client) Open(path string) (*File, error) {
	return c.open(path, toPflags(os.O_RDONLY))
}

// OpenFile is the generalized open call; most users will use Open or
// Create instead. It opens the named file with specified flag (O_RDONLY
// etc.). If successful, methods on the returned File can be used for I/O.
func (c *Client) OpenFile(path string, f int) (*File, error) {
	return c.open(path, toPflags(f))
}

func (c *Client) open(path string, pflags uint32) (*File, error) {
	id := c.nextID()
	typ, data, err := c.sendPacket(context.Background(), nil, &sshFxpOpenPacket{
		ID:     id,
		Path:   path,
		Pflags: pflags,
	})
	if err != nil {
		return nil, err
	}
	switch typ {
	case sshFxpHandle:
		data, err := unmarshalSID(id, data)
		if err != nil {
			return nil, err
		}
		handle, _, err := unmarshalStringSafe(data)
		if err != nil {
			return nil, err
		}
		return newFile(c, path, handle), nil
	case sshFxpStatus:
		return nil, normaliseError(unmarshalStatus(id, data))
	default:
		return nil, unimplementedPacketErr(typ)
	}
}

// close closes a handle handle previously returned in the response
// to SSH_FXP_OPEN or SSH_FXP_OPENDIR. The handle becomes invalid
// immediately after this request has been sent.
//
// hostgate (change 28): its reply is waited for until ctx ends; the
// request is sent all the same, without waiting for the send lock
// (change 29, sendClose).
func (c *Client) close(ctx context.Context, handle string) error {
	id, ch := c.sendClose(handle)
	var s result
	select {
	case s = <-ch:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.flatten()
	defer s.release()
	if s.err != nil {
		return s.err
	}
	switch s.typ {
	case sshFxpStatus:
		return normaliseError(unmarshalStatus(id, s.data))
	default:
		return unimplementedPacketErr(s.typ)
	}
}

// statContext is a STAT request bounded by ctx (hostgate: change 14).
func (c *Client) statContext(ctx context.Context, path string) (*FileStat, error) {
	return c.statFor(ctx, nil, path)
}

// statFor is statContext for a request of owner's, which owner's Abort
// fails (hostgate: change 15).
func (c *Client) statFor(ctx context.Context, owner *File, path string) (*FileStat, error) {
	id := c.nextID()
	typ, data, err := c.sendPacketFor(ctx, owner, nil, &sshFxpStatPacket{
		ID:   id,
		Path: path,
	})
	if err != nil {
		return nil, err
	}
	switch typ {
	case sshFxpAttrs:
		data, err := unmarshalSID(id, data)
		if err != nil {
			return nil, err
		}
		attr, _, err := unmarshalAttrs(data)
		return attr, err
	case sshFxpStatus:
		return nil, normaliseError(unmarshalStatus(id, data))
	default:
		return nil, unimplementedPacketErr(typ)
	}
}

// hostgate (change 15): owner, when not nil, is the File whose handle it
// is, and its Abort fails the request.
func (c *Client) fstat(owner *File, handle string) (*FileStat, error) {
	id := c.nextID()
	typ, data, err := c.sendPacketFor(context.Background(), owner, nil, &sshFxpFstatPacket{
		ID:     id,
		Handle: handle,
	})
	if err != nil {
		return nil, err
	}
	switch typ {
	case sshFxpAttrs:
		data, err := unmarshalSID(id, data)
		if err != nil {
			return nil, err
		}
		attr, _, err := unmarshalAttrs(data)
		return attr, err
	case sshFxpStatus:
		return nil, normaliseError(unmarshalStatus(id, data))
	default:
		return nil, unimplementedPacketErr(typ)
	}
}

// StatVFS retrieves VFS statistics from a remote host.
//
// It implements the statvfs@openssh.com SSH_FXP_EXTENDED feature
// from http://www.opensource.apple.com/source/OpenSSH/OpenSSH-175/openssh/PROTOCOL?txt.
func (c *Client) StatVFS(path string) (*StatVFS, error) {
	return c.StatVFSContext(context.Background(), path)
}

// StatVFSContext is StatVFS, returning ctx's error as soon as ctx ends
// before the answer (hostgate: change 39).
func (c *Client) StatVFSContext(ctx context.Context, path string) (*StatVFS, error) {
	// send the StatVFS packet to the server
	id := c.nextID()
	typ, data, err := c.sendPacket(ctx, nil, &sshFxpStatvfsPacket{
		ID:   id,
		Path: path,
	})
	if err != nil {
		return nil, err
	}

	switch typ {
	// server responded with valid data
	case sshFxpExtendedReply:
		var response StatVFS
		err = binary.Read(bytes.NewReader(data), binary.BigEndian, &response)
		if err != nil {
			return nil, errors.New("can not parse reply")
		}

		return &response, nil

	// the resquest failed
	case sshFxpStatus:
		return nil, normaliseError(unmarshalStatus(id, data))

	default:
		return nil, unimplementedPacketErr(typ)
	}
}

// Join joins any number of path elements into a single path, adding a
// separating slash if necessary. The result is Cleaned; in particular, all
// empty strings are ignored.
func (c *Client) Join(elem ...string) string { return path.Join(elem...) }

// Remove removes the specified file or directory. An error will be returned if no
// file or directory with the specified path exists, or if the specified directory
// is not empty.
func (c *Client) Remove(path string) error {
	return c.RemoveContext(context.Background(), path)
}

// RemoveContext is Remove whose requests (remove, then rmdir, then stat
// to tell which error) are each sent only while ctx has not ended and
// waited for no longer than ctx (hostgate: change 33).
func (c *Client) RemoveContext(ctx context.Context, path string) error {
	errF := c.removeFileContext(ctx, path)
	if errF == nil {
		return nil
	}

	errD := c.RemoveDirectoryContext(ctx, path)
	if errD == nil {
		return nil
	}

	// Both failed: figure out which error to return.

	if errF, ok := errF.(*os.PathError); ok {
		// The only time it makes sense to compare errors, is when both are `*os.PathError`.
		// We cannot test these directly with errF == errD, as that would be a pointer comparison.

		if errD, ok := errD.(*os.PathError); ok && errors.Is(errF.Err, errD.Err) {
			// If they are both pointers to PathError,
			// and the same underlying error, then return that.
			return errF
		}
	}

	fi, err := c.StatContext(ctx, path)
	if err != nil {
		return err
	}

	if fi.IsDir() {
		return errD
	}

	return errF
}

func (c *Client) removeFileContext(ctx context.Context, path string) error {
	id := c.nextID()
	typ, data, err := c.sendPacket(ctx, nil, &sshFxpRemovePacket{
		ID:       id,
		Filename: path,
	})
	if err != nil {
		return err
	}
	switch typ {
	case sshFxpStatus:
		err = normaliseError(unmarshalStatus(id, data))
		if err == nil {
			return nil
		}
		return &os.PathError{
			Op:   "remove",
			Path: path,
			Err:  err,
		}
	default:
		return unimplementedPacketErr(typ)
	}
}

// RemoveDirectory removes a directory path.
func (c *Client) RemoveDirectory(path string) error {
	return c.RemoveDirectoryContext(context.Background(), path)
}

// RemoveDirectoryContext is RemoveDirectory whose request is sent only
// while ctx has not ended and waited for no longer than ctx (hostgate:
// change 33).
func (c *Client) RemoveDirectoryContext(ctx context.Context, path string) error {
	id := c.nextID()
	typ, data, err := c.sendPacket(ctx, nil, &sshFxpRmdirPacket{
		ID:   id,
		Path: path,
	})
	if err != nil {
		return err
	}
	switch typ {
	case sshFxpStatus:
		err = normaliseError(unmarshalStatus(id, data))
		if err == nil {
			return nil
		}
		return &os.PathError{
			Op:   "remove",
			Path: path,
			Err:  err,
		}
	default:
		return unimplementedPacketErr(typ)
	}
}

// Rename renames a file.
func (c *Client) Rename(oldname, newname string) error {
	return c.RenameContext(context.Background(), oldname, newname)
}

// RenameContext is Rename whose request is sent only while ctx has not
// ended and waited for no longer than ctx (hostgate: change 33).
func (c *Client) RenameContext(ctx context.Context, oldname, newname string) error {
	id := c.nextID()
	typ, data, err := c.sendPacket(ctx, nil, &sshFxpRenamePacket{
		ID:      id,
		Oldpath: oldname,
		Newpath: newname,
	})
	if err != nil {
		return err
	}
	switch typ {
	case sshFxpStatus:
		return normaliseError(unmarshalStatus(id, data))
	default:
		return unimplementedPacketErr(typ)
	}
}

// PosixRename renames a file using the posix-rename@openssh.com extension
// which will replace newname if it already exists.
func (c *Client) PosixRename(oldname, newname string) error {
	return c.PosixRenameContext(context.Background(), oldname, newname)
}

// PosixRenameContext is PosixRename whose request is sent only while ctx
// has not ended and waited for no longer than ctx (hostgate: change 33).
func (c *Client) PosixRenameContext(ctx context.Context, oldname, newname string) error {
	id := c.nextID()
	typ, data, err := c.sendPacket(ctx, nil, &sshFxpPosixRenamePacket{
		ID:      id,
		Oldpath: oldname,
		Newpath: newname,
	})
	if err != nil {
		return err
	}
	switch typ {
	case sshFxpStatus:
		return normaliseError(unmarshalStatus(id, data))
	default:
		return unimplementedPacketErr(typ)
	}
}

// RealPath can be used to have the server canonicalize any given path name to an absolute path.
//
// This is useful for converting path names containing ".." components,
// or relative pathnames without a leading slash into absolute paths.
func (c *Client) RealPath(path string) (string, error) {
	return c.RealPathContext(context.Background(), path)
}

// RealPathContext is RealPath whose request is sent only while ctx has not
// ended and waited for no longer than ctx (hostgate: change 33).
func (c *Client) RealPathContext(ctx context.Context, path string) (string, error) {
	id := c.nextID()
	typ, data, err := c.sendPacket(ctx, nil, &sshFxpRealpathPacket{
		ID:   id,
		Path: path,
	})
	if err != nil {
		return "", err
	}
	switch typ {
	case sshFxpName:
		data, err := unmarshalSID(id, data)
		if err != nil {
			return "", err
		}
		count, data, err := unmarshalCount(data)
		if err != nil {
			return "", err
		}
		if count != 1 {
			return "", unexpectedCount(1, uint32(count))
		}
		filename, _, err := unmarshalStringSafe(data) // ignore attributes
		if err != nil {
			return "", err
		}
		return filename, nil
	case sshFxpStatus:
		return "", normaliseError(unmarshalStatus(id, data))
	default:
		return "", unimplementedPacketErr(typ)
	}
}

// Getwd returns the current working directory of the server. Operations
// involving relative paths will be based at this location.
func (c *Client) Getwd() (string, error) {
	return c.RealPath(".")
}

// Mkdir creates the specified directory. An error will be returned if a file or
// directory with the specified path already exists, or if the directory's
// parent folder does not exist (the method cannot create complete paths).
func (c *Client) Mkdir(path string) error {
	return c.MkdirContext(context.Background(), path)
}

// MkdirContext is Mkdir whose request is sent only while ctx has not
// ended and waited for no longer than ctx (hostgate: change 33).
func (c *Client) MkdirContext(ctx context.Context, path string) error {
	id := c.nextID()
	typ, data, err := c.sendPacket(ctx, nil, &sshFxpMkdirPacket{
		ID:   id,
		Path: path,
	})
	if err != nil {
		return err
	}
	switch typ {
	case sshFxpStatus:
		return normaliseError(unmarshalStatus(id, data))
	default:
		return unimplementedPacketErr(typ)
	}
}

// MkdirAll creates a directory named path, along with any necessary parents,
// and returns nil, or else returns an error.
// If path is already a directory, MkdirAll does nothing and returns nil.
// If, while making any directory, that path is found to already be a regular file, an error is returned.
func (c *Client) MkdirAll(path string) error {
	// Most of this code mimics https://golang.org/src/os/path.go?s=514:561#L13
	// Fast path: if we can tell whether path is a directory or file, stop with success or error.
	dir, err := c.Stat(path)
	if err == nil {
		if dir.IsDir() {
			return nil
		}
		return &os.PathError{Op: "mkdir", Path: path, Err: syscall.ENOTDIR}
	}

	// Slow path: make sure parent exists and then call Mkdir for path.
	i := len(path)
	for i > 0 && path[i-1] == '/' { // Skip trailing path separator.
		i--
	}

	j := i
	for j > 0 && path[j-1] != '/' { // Scan backward over element.
		j--
	}

	if j > 1 {
		// Create parent
		err = c.MkdirAll(path[0 : j-1])
		if err != nil {
			return err
		}
	}

	// Parent now exists; invoke Mkdir and use its result.
	err = c.Mkdir(path)
	if err != nil {
		// Handle arguments like "foo/." by
		// double-checking that directory doesn't exist.
		dir, err1 := c.Lstat(path)
		if err1 == nil && dir.IsDir() {
			return nil
		}
		return err
	}
	return nil
}

// RemoveAll delete files recursively in the directory and Recursively delete subdirectories.
// An error will be returned if no file or directory with the specified path exists
func (c *Client) RemoveAll(path string) error {

	// Get the file/directory information, without following symlinks
	fi, err := c.Lstat(path)
	if err != nil {
		return err
	}

	if fi.IsDir() {
		// Delete files recursively in the directory
		files, err := c.ReadDir(path)
		if err != nil {
			return err
		}

		for _, file := range files {
			if file.IsDir() {
				// Recursively delete subdirectories
				err = c.RemoveAll(path + "/" + file.Name())
				if err != nil {
					return err
				}
			} else {
				// Delete individual files
				err = c.Remove(path + "/" + file.Name())
				if err != nil {
					return err
				}
			}
		}

	}

	return c.Remove(path)

}

// File represents a remote file.
type File struct {
	c    *Client
	path string

	mu     sync.RWMutex
	handle string
	offset int64 // current offset within remote file

	// hostgate (change 15): Abort's error, and closed by it; aborted is
	// guarded by the client's inflight lock (clientConn's Mutex).
	aborted error
	abortCh <-chan struct{}
	// hostgate (change 16): ends with Abort, whose error is its cause:
	// the File's requests are written with it, so that Abort also ends a
	// write of one waiting on the SSH channel's window.
	abortCtx    context.Context
	abortCancel context.CancelCauseFunc
}

func newFile(c *Client, path, handle string) *File {
	f := &File{c: c, path: path, handle: handle}
	f.abortCtx, f.abortCancel = context.WithCancelCause(context.Background())
	f.abortCh = f.abortCtx.Done()
	return f
}

// Abort fails the File's requests in flight, and every later one, with err
// (hostgate: change 15): the calls waiting for their replies (Read,
// ReadAt, WriteTo, Write, WriteAt, ReadFrom, Stat, Close and the others)
// return at once, where they would wait for a server that stopped
// answering, and Close no longer waits for its reply. Replies that still
// come are dropped, and the client's other requests go on. The File stays
// to be closed: Close after Abort sends the close request without waiting
// for its reply and returns nil, so that the server lets the handle go
// should it answer again. Only the first Abort counts; it does not wait
// for the calls to return.
//
// A nil err is taken as ErrAborted. A write that Abort cut short may or
// may not have reached the file.
func (f *File) Abort(err error) {
	if err == nil {
		err = ErrAborted
	}
	f.c.abort(f, err)
}

// ErrAborted is what a File's calls return after Abort(nil) (hostgate:
// change 15).
var ErrAborted = errors.New("sftp: file aborted")

// Close closes the File, rendering it unusable for I/O. It returns an
// error, if any.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()

	if f.handle == "" {
		return os.ErrClosed
	}

	// The design principle here is that when `openssh-portable/sftp-server.c` is doing `handle_close`,
	// it will unconditionally mark the handle as unused,
	// so we need to also unconditionally mark this handle as invalid.
	// By invalidating our local copy of the handle,
	// we ensure that there cannot be any erroneous use-after-close requests sent after Close.

	handle := f.handle
	f.handle = ""

	// hostgate (change 15): the close request is the File's last and
	// Abort does not fail it, so that the server lets the handle go;
	// once the File is aborted, its reply is not waited for (it lands in
	// ch, which nobody reads).
	//
	// hostgate (change 16): nor is its sending, which waits for the
	// conn's lock: a write cut short by Abort holds it until the rest of
	// its packet is out (conn.sendPacketContext), and a write of another
	// File's may wait on the SSH channel's window the server does not
	// grant: an Abort while Close waits there must end the wait. The
	// request goes from a goroutine of its own.
	id := f.c.nextID()
	ch := make(chan result, 1)
	go f.c.dispatchRequest(ch, &sshFxpClosePacket{ID: id, Handle: handle})
	var s result
	select {
	case s = <-ch:
	case <-f.abortCh:
		return nil
	}
	s.flatten()
	defer s.release()
	if s.err != nil {
		return s.err
	}
	switch s.typ {
	case sshFxpStatus:
		return normaliseError(unmarshalStatus(id, s.data))
	default:
		return unimplementedPacketErr(s.typ)
	}
}

// Name returns the name of the file as presented to Open or Create.
func (f *File) Name() string {
	return f.path
}

// Read reads up to len(b) bytes from the File. It returns the number of bytes
// read and an error, if any. Read follows io.Reader semantics, so when Read
// encounters an error or EOF condition after successfully reading n > 0 bytes,
// it returns the number of bytes read.
//
// To maximise throughput for transferring the entire file (especially
// over high latency links) it is recommended to use WriteTo rather
// than calling Read multiple times. io.Copy will do this
// automatically.
func (f *File) Read(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()

	n, err := f.readAt(b, f.offset)
	f.offset += int64(n)
	return n, err
}

// readChunkAt attempts to read the whole entire length of the buffer from the file starting at the offset.
// It will continue progressively reading into the buffer until it fills the whole buffer, or an error occurs.
//
// hostgate (change 11): tr, when not nil, counts its short answers.
func (f *File) readChunkAt(ch chan result, b []byte, off int64, tr *ShortReads) (n int, err error) {
	// hostgate: the reply is received here rather than through sendPacket,
	// so that its page goes back once its bytes are copied into b.
	if cap(ch) < 1 {
		ch = make(chan result, 1)
	}
	for n < len(b) {
		id := f.c.nextID()
		f.c.dispatchFor(f, ch, &sshFxpReadPacket{
			ID:     id,
			Handle: f.handle,
			Offset: uint64(off) + uint64(n),
			Len:    uint32(len(b) - n),
		})
		var m int
		asked := len(b) - n
		m, err = takeRead(id, ch, b[n:])
		n += m
		if err != nil {
			return n, err
		}
		if n < len(b) {
			if err := tr.Short(off+int64(n), asked, m); err != nil {
				return n, err
			}
			// hostgate (change 8): a short answer; the rest at once,
			// in pieces of its size.
			m, err = f.readRest(b[n:], off+int64(n), m, tr)
			return n + m, err
		}
	}

	return n, nil
}

func (f *File) readAtSequential(b []byte, off int64) (read int, err error) {
	for read < len(b) {
		rb := b[read:]
		if len(rb) > f.c.maxPacket {
			rb = rb[:f.c.maxPacket]
		}
		n, err := f.readChunkAt(nil, rb, off+int64(read), nil)
		if n < 0 {
			panic("sftp.File: returned negative count from readChunkAt")
		}
		if n > 0 {
			read += n
		}
		if err != nil {
			return read, err
		}
	}
	return read, nil
}

// ReadAt reads up to len(b) byte from the File at a given offset `off`. It returns
// the number of bytes read and an error, if any. ReadAt follows io.ReaderAt semantics,
// so the file offset is not altered during the read.
func (f *File) ReadAt(b []byte, off int64) (int, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()

	return f.readAt(b, off)
}

// readAt must be called while holding either the Read or Write mutex in File.
// This code is concurrent safe with itself, but not with Close.
func (f *File) readAt(b []byte, off int64) (int, error) {
	if f.handle == "" {
		return 0, os.ErrClosed
	}

	// hostgate (change 27): the server's limits, waited for until f's Abort.
	if err := f.waitLimits(); err != nil {
		return 0, err
	}
	size := f.c.readSizeNow() // hostgate (change 8): what the server answers
	if len(b) <= size {
		// This should be able to be serviced with 1/2 requests.
		// So, just do it directly.
		return f.readChunkAt(nil, b, off, nil)
	}

	if f.c.disableConcurrentReads {
		return f.readAtSequential(b, off)
	}

	// Split the read into multiple maxPacket-sized concurrent reads bounded by maxConcurrentRequests.
	// This allows writes with a suitably large buffer to transfer data at a much faster rate
	// by overlapping round trip times.

	cancel := make(chan struct{})

	// hostgate (change 8): requests of the size the server answers,
	// as many more of them as keep the bytes in flight.
	concurrency := len(b)/size + 1
	if maxRequests := f.c.requestsFor(size); concurrency > maxRequests || concurrency < 1 {
		concurrency = maxRequests
	}

	resPool := newResChanPool(concurrency)

	type work struct {
		id  uint32
		res chan result

		b   []byte
		off int64
	}
	workCh := make(chan work)

	// Slice: cut up the Read into any number of buffers of length <= f.c.maxPacket, and at appropriate offsets.
	go func() {
		defer close(workCh)

		b := b
		offset := off

		for len(b) > 0 {
			chunkSize := f.c.readSizeNow() // hostgate: smaller once a read was short
			rb := b
			if len(rb) > chunkSize {
				rb = rb[:chunkSize]
			}

			id := f.c.nextID()
			res := resPool.Get()

			f.c.dispatchFor(f, res, &sshFxpReadPacket{
				ID:     id,
				Handle: f.handle,
				Offset: uint64(offset),
				Len:    uint32(len(rb)),
			})

			select {
			case workCh <- work{id, res, rb, offset}:
			case <-cancel:
				return
			}

			offset += int64(len(rb))
			b = b[len(rb):]
		}
	}()

	type rErr struct {
		off int64
		err error
	}
	errCh := make(chan rErr)

	var wg sync.WaitGroup
	wg.Add(concurrency)
	for i := 0; i < concurrency; i++ {
		// Map_i: each worker gets work, and then performs the Read into its buffer from its respective offset.
		go func() {
			defer wg.Done()

			for packet := range workCh {
				var n int

				s := <-packet.res
				resPool.Put(packet.res)
				s.flatten() // hostgate: copied out below

				err := s.err
				if err == nil {
					switch s.typ {
					case sshFxpStatus:
						err = normaliseError(unmarshalStatus(packet.id, s.data))

					case sshFxpData:
						var data []byte
						data, err = unmarshalDataReply(packet.id, s.data)
						if err == nil {
							n = copy(packet.b, data)
						}

					default:
						err = unimplementedPacketErr(s.typ)
					}
				}
				s.release() // hostgate: copied out
				if err == nil && n < len(packet.b) {
					// hostgate (change 7): upstream took a short answer
					// for the end of the file, which it is only from a
					// server whose replies are as large as our requests:
					// one with a smaller limit (OpenSSH before 8.6
					// answered at most 64 KiB, this package's server 32
					// KiB by default) answers short inside the file. Read
					// on; the server says where the file ends.
					var m int
					m, err = f.readRest(packet.b[n:], packet.off+int64(n), n, nil)
					n += m
				}

				if err != nil {
					// return the offset as the start + how much we read before the error.
					errCh <- rErr{packet.off + int64(n), err}

					// DO NOT return.
					// We want to ensure that workCh is drained before wg.Wait returns.
				}
			}
		}()
	}

	// Wait for long tail, before closing results.
	go func() {
		wg.Wait()
		close(errCh)
	}()

	// Reduce: collect all the results into a relevant return: the earliest offset to return an error.
	firstErr := rErr{math.MaxInt64, nil}
	for rErr := range errCh {
		if rErr.off <= firstErr.off {
			firstErr = rErr
		}

		select {
		case <-cancel:
		default:
			// stop any more work from being distributed. (Just in case.)
			close(cancel)
		}
	}

	if firstErr.err != nil {
		// firstErr.err != nil if and only if firstErr.off > our starting offset.
		return int(firstErr.off - off), firstErr.err
	}

	// As per spec for io.ReaderAt, we return nil error if and only if we read everything.
	return len(b), nil
}

// writeToSequential implements WriteTo, but works sequentially with no parallelism.
//
// hostgate (change 11): tr, when not nil (a regular file), counts the
// short answers.
func (f *File) writeToSequential(w io.Writer, tr *ShortReads) (written int64, err error) {
	b := make([]byte, f.c.maxPacket)
	ch := make(chan result, 1) // reusable channel

	for {
		n, err := f.readChunkAt(ch, b, f.offset, tr)
		if n < 0 {
			panic("sftp.File: returned negative count from readChunkAt")
		}

		if n > 0 {
			f.offset += int64(n)

			m, err := w.Write(b[:n])
			written += int64(m)

			if err != nil {
				return written, err
			}
		}

		if err != nil {
			if err == io.EOF {
				return written, nil // return nil explicitly.
			}

			return written, err
		}
	}
}

// WriteTo writes the file to the given Writer.
// The return value is the number of bytes written.
// Any error encountered during the write is also returned.
//
// This method is preferred over calling Read multiple times
// to maximise throughput for transferring the entire file,
// especially over high latency links.
func (f *File) WriteTo(w io.Writer) (written int64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()

	if f.handle == "" {
		return 0, os.ErrClosed
	}

	if f.c.disableConcurrentReads {
		return f.writeToSequential(w, nil)
	}

	// hostgate (change 27): the server's limits, waited for until f's Abort.
	if err := f.waitLimits(); err != nil {
		return 0, err
	}

	// For concurrency, we want to guess how many concurrent workers we should use.
	var fileStat *FileStat
	if f.c.useFstat {
		fileStat, err = f.c.fstat(f, f.handle)
	} else {
		fileStat, err = f.c.statFor(context.Background(), f, f.path) // hostgate (change 15)
	}
	if err != nil {
		return 0, err
	}

	size := f.c.readSizeNow() // hostgate (change 8): what the server answers
	fileSize := fileStat.Size
	// hostgate (change 11): a regular file's reads are answered whole
	// but at its end, by a server that answers at least MinReadSize.
	var tr *ShortReads
	if isRegular(fileStat.Mode) {
		tr = &ShortReads{Size: int64(fileSize)}
	}
	if fileSize <= uint64(size) || !isRegular(fileStat.Mode) {
		// only regular files are guaranteed to return (full read) xor (partial read, next error)
		return f.writeToSequential(w, tr)
	}

	// hostgate (change 8): upstream sent up to maxConcurrentRequests
	// requests of maxPacket (fewer for a smaller file), each waited for
	// by a worker of its own. Here each request asks for the client's
	// read size when it is sent, which shrinks once the server answers
	// short, and requests go out while their bytes fit in what upstream
	// had in flight (at most requestsScale times as many requests), a
	// worker started for each one no idle worker takes: a 64 KiB server
	// gets four times as many 64 KiB requests, not 255 KiB ones each
	// answered in four sequential steps.
	budget := min(int64(fileSize)+int64(size), int64(f.c.maxConcurrentRequests)*int64(f.c.maxPacket))
	maxRequests := f.c.maxConcurrentRequests * requestsScale
	freed := make(chan int, maxRequests) // a written chunk's size, given back by the writer
	resPool := newResChanPool(maxRequests)

	cancel := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		// Once the writing Reduce phase has ended, all the feed work needs to unconditionally stop.
		close(cancel)

		// We want to wait until all outstanding goroutines with an `f` or `f.c` reference have completed.
		// Just to be sure we don’t orphan any goroutines any hanging references.
		wg.Wait()
	}()

	type writeWork struct {
		b    []byte
		page *respPage // hostgate: b's buffer, given back once b is written
		// hostgate: or the data, n bytes of it, left in the SSH
		// channel's packets (change 6), given back once written.
		refs *dataRefs
		n    int
		// hostgate (change 7): the rest of a chunk the server answered
		// short inside the file, read on by the worker.
		rest []byte
		off  int64
		size int // hostgate (change 8): data asked for
		err  error

		next chan writeWork
	}
	writeCh := make(chan writeWork)

	type readWork struct {
		id   uint32
		res  chan result
		off  int64
		size int // hostgate (change 8): data asked for

		cur, next chan writeWork
	}
	readCh := make(chan readWork)

	// Map_i: each worker gets readWork, and does the Read into a buffer at the given offset.
	worker := func() {
		defer wg.Done()

		for readWork := range readCh {
			chunkSize := readWork.size
			var b []byte
			var refs *dataRefs // hostgate
			var n int

			s := <-readWork.res
			resPool.Put(readWork.res)

			err := s.err
			if err == nil {
				switch s.typ {
				case sshFxpStatus:
					err = normaliseError(unmarshalStatus(readWork.id, s.data))

				case sshFxpData:
					if s.refs != nil {
						// hostgate: written from the channel's
						// packets (change 6); no more than asked
						// for, as below.
						n, err = s.sharedData(readWork.id, chunkSize)
						if err == nil {
							refs = s.refs
						}
						break
					}
					var data []byte
					data, err = unmarshalDataReply(readWork.id, s.data)
					if err == nil {
						// A malicious server may return more data than we
						// requested (up to the packet limit); keep only
						// what was asked for.
						// hostgate: the reply's own bytes are written,
						// not a copy of them; its page goes back after.
						if len(data) > chunkSize {
							data = data[:chunkSize]
						}
						b = data
						n = len(b)
					}

				default:
					err = unimplementedPacketErr(s.typ)
				}
			}

			if b == nil && refs == nil {
				s.release()
			}
			if err == nil && n == 0 {
				// hostgate (change 7): no bytes and no end of
				// file, as readChunkAt's: past the size stat gave,
				// where nothing reads on, the next chunk was asked
				// for, and so on for ever (found by the audit29
				// audit).
				err = errEmptyRead
			}
			var rest []byte
			if err == nil && n < chunkSize && readWork.off+int64(n) != int64(fileSize) {
				// hostgate (change 7): a short answer inside the
				// file (a server whose replies are smaller than our
				// requests) is read on here, so that the workers
				// still read at once; upstream wrote what came and
				// went on at the next chunk, skipping the rest of
				// this one without an error. io.EOF here: the file
				// shrank. An answer that ends past the size stat
				// gave is read on too: the file grew (found by the
				// audit29 audit); only one ending there is taken
				// for the end without asking.
				// hostgate (change 8): the rest in pieces of the
				// answer's size, at once.
				if err = tr.Short(readWork.off+int64(n), chunkSize, n); err == nil {
					rest = make([]byte, chunkSize-n)
					var m int
					m, err = f.readRest(rest, readWork.off+int64(n), n, tr)
					rest = rest[:m]
				}
			}
			writeWork := writeWork{
				b:    b,
				page: s.page,
				refs: refs,
				n:    n,
				rest: rest,
				off:  readWork.off,
				size: chunkSize,
				err:  err,

				next: readWork.next,
			}

			select {
			case readWork.cur <- writeWork:
			case <-cancel:
				// hostgate: the write loop has returned; give
				// back what nobody will write.
				s.release()
			}

			// DO NOT return.
			// We want to ensure that readCh is drained before wg.Wait returns.
		}
	}

	// Slice: hand out chunks of work on demand, with a `cur` and `next` channel built-in for sequencing.
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(readCh)

		off := f.offset
		left, inflight, workers := budget, 0, 0

		cur := writeCh
		for {
			chunkSize := f.c.readSizeNow()
			// Past the size stat gave, one request at a time, as
			// OpenSSH's sftp: the first normally hears the end, where
			// a budget of requests past it all had to be answered.
			for left < int64(chunkSize) || inflight == maxRequests || off >= int64(fileSize) && inflight > 0 {
				select {
				case n := <-freed:
					left += int64(n)
					inflight--
				case <-cancel:
					return
				}
				// The answer that freed the budget may have been short:
				// what it taught goes into this request, not the next.
				chunkSize = f.c.readSizeNow()
			}

			id := f.c.nextID()
			res := resPool.Get()

			next := make(chan writeWork)
			readWork := readWork{
				id:   id,
				res:  res,
				off:  off,
				size: chunkSize,

				cur:  cur,
				next: next,
			}

			f.c.dispatchFor(f, res, &sshFxpReadPacket{
				ID:     id,
				Handle: f.handle,
				Offset: uint64(off),
				Len:    uint32(chunkSize),
			})
			left -= int64(chunkSize)
			inflight++

			select {
			case readCh <- readWork:
			default:
				// Every worker waits for a reply: one more.
				if workers < maxRequests {
					workers++
					wg.Add(1)
					go worker()
				}
				select {
				case readCh <- readWork:
				case <-cancel:
					// hostgate: the request is out and no worker
					// will take its answer: wait for it here, as a
					// worker would, and give its packets back
					// (change 6); left in res they never were.
					s := <-res
					s.release()
					return
				}
			}

			off += int64(chunkSize)
			cur = next
		}
	}()

	// Reduce: serialize the results from the reads into sequential writes.
	// hostgate (change 12): to a writer that takes several buffers in one
	// call (writev: a file, a pipe, a socket), the bytes of the replies
	// already come are gathered and written at once, up to gatherMax,
	// each reply given back after; to any other, written as they come.
	g := gatherFor(w, freed)
	defer g.drop()
	flush := func() error {
		n, err := g.flush()
		written += n
		return err
	}
	cur := writeCh
	for {
		var packet writeWork
		var ok bool
		select {
		case packet, ok = <-cur:
		default:
			// hostgate: nothing more has come; write what has.
			if err := flush(); err != nil {
				return written, err
			}
			packet, ok = <-cur
		}
		if !ok {
			return written, errors.New("sftp.File.WriteTo: unexpectedly closed channel")
		}

		if read := packet.n + len(packet.rest); read > 0 && packet.off > f.offset {
			// hostgate (change 7): a chunk before this one was
			// answered short at the size stat gave, where workers do
			// not read on, and the file grew. Its rest is read here,
			// before this chunk's bytes, which upstream wrote after
			// the gap without an error (found by the audit29 audit).
			err := flush()
			var n int64
			if err == nil {
				n, err = f.writeGap(w, packet.off, tr)
				written += n
			}
			if err != nil {
				if packet.refs != nil {
					packet.refs.release()
				}
				if err == io.EOF {
					return written, nil // the file shrank again
				}
				return written, err
			}
		}

		// Because writes are serialized, this will always be the last successfully read byte.
		// hostgate (change 7): but not the start of a chunk past the
		// end, which only says where the file ended.
		if read := packet.n + len(packet.rest); read > 0 || packet.err == nil {
			f.offset = packet.off + int64(read)
		}

		if g != nil {
			// hostgate (change 12): written with the replies around
			// it, given back after.
			g.add(packet.refs, packet.b, packet.rest, packet.page, packet.size)
			if packet.err != nil {
				if err := flush(); err != nil {
					return written, err
				}
				if packet.err == io.EOF {
					return written, nil
				}
				return written, packet.err
			}
			if g.full() {
				if err := flush(); err != nil {
					return written, err
				}
			}
			cur = packet.next
			continue
		}

		if packet.refs != nil {
			// hostgate: from the channel's packets (change 6).
			n, err := packet.refs.writeTo(w)
			written += n
			packet.refs.release()
			if err != nil {
				return written, err
			}
		} else if len(packet.b) > 0 {
			n, err := w.Write(packet.b)
			written += int64(n)
			if err != nil {
				return written, err
			}
		}
		if len(packet.rest) > 0 {
			n, err := w.Write(packet.rest)
			written += int64(n)
			if err != nil {
				return written, err
			}
		}

		if packet.err != nil {
			if packet.err == io.EOF {
				return written, nil
			}

			return written, packet.err
		}

		if packet.page != nil {
			packet.page.put()
		}
		freed <- packet.size // hostgate (change 8): never blocks, one per request
		cur = packet.next
	}
}

// errEmptyRead is a read answered with no bytes and no end of file
// (hostgate, change 7).
var errEmptyRead = errors.New("sftp: the server answered a read with no bytes and no end of file")

// writeGap reads the bytes from f.offset to off, fewer than a chunk, and
// writes them to w (hostgate, change 7: File.WriteTo's rest of a chunk
// answered short at the size stat gave, the file grown since). io.EOF
// when the file ends first.
func (f *File) writeGap(w io.Writer, off int64, tr *ShortReads) (int64, error) {
	b := make([]byte, off-f.offset)
	m, err := f.readChunkAt(nil, b, f.offset, tr)
	f.offset += int64(m)
	wn, werr := w.Write(b[:m])
	if werr != nil {
		return int64(wn), werr
	}
	return int64(wn), err
}

// Stat returns the FileInfo structure describing file. If there is an
// error.
func (f *File) Stat() (os.FileInfo, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()

	if f.handle == "" {
		return nil, os.ErrClosed
	}

	return f.stat()
}

func (f *File) stat() (os.FileInfo, error) {
	fs, err := f.c.fstat(f, f.handle)
	if err != nil {
		return nil, err
	}
	return fileInfoFromStat(fs, path.Base(f.path)), nil
}

// Write writes len(b) bytes to the File. It returns the number of bytes
// written and an error, if any. Write returns a non-nil error when n !=
// len(b).
//
// To maximise throughput for transferring the entire file (especially
// over high latency links) it is recommended to use ReadFrom rather
// than calling Write multiple times. io.Copy will do this
// automatically.
func (f *File) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()

	if f.handle == "" {
		return 0, os.ErrClosed
	}

	n, err := f.writeAt(b, f.offset)
	f.offset += int64(n)
	return n, err
}

func (f *File) writeChunkAt(ch chan result, b []byte, off int64) (int, error) {
	typ, data, err := f.c.sendPacketFor(context.Background(), f, ch, &sshFxpWritePacket{
		ID:     f.c.nextID(),
		Handle: f.handle,
		Offset: uint64(off),
		Length: uint32(len(b)),
		Data:   b,
	})
	if err != nil {
		return 0, err
	}

	switch typ {
	case sshFxpStatus:
		id, _, err := unmarshalUint32Safe(data)
		if err != nil {
			return 0, err
		}
		err = normaliseError(unmarshalStatus(id, data))
		if err != nil {
			return 0, err
		}

	default:
		return 0, unimplementedPacketErr(typ)
	}

	return len(b), nil
}

// writeAtConcurrent implements WriterAt, but works concurrently rather than sequentially.
func (f *File) writeAtConcurrent(b []byte, off int64) (int, error) {
	// Split the write into multiple maxPacket sized concurrent writes
	// bounded by maxConcurrentRequests. This allows writes with a suitably
	// large buffer to transfer data at a much faster rate due to
	// overlapping round trip times.

	cancel := make(chan struct{})

	type work struct {
		id  uint32
		res chan result

		off int64
	}
	workCh := make(chan work)

	// hostgate (change 8): writes of no more than the server takes, as
	// many more of them as keep the bytes in flight.
	chunkSize := f.c.writeSizeNow() // writeAt waited for the limits
	concurrency := len(b)/chunkSize + 1
	if maxRequests := f.c.requestsFor(chunkSize); concurrency > maxRequests || concurrency < 1 {
		concurrency = maxRequests
	}

	pool := newResChanPool(concurrency)

	// Slice: cut up the Read into any number of buffers of length <= f.c.maxPacket, and at appropriate offsets.
	go func() {
		defer close(workCh)

		var read int

		for read < len(b) {
			wb := b[read:]
			if len(wb) > chunkSize {
				wb = wb[:chunkSize]
			}

			id := f.c.nextID()
			res := pool.Get()
			off := off + int64(read)

			f.c.dispatchFor(f, res, &sshFxpWritePacket{
				ID:     id,
				Handle: f.handle,
				Offset: uint64(off),
				Length: uint32(len(wb)),
				Data:   wb,
			})

			select {
			case workCh <- work{id, res, off}:
			case <-cancel:
				return
			}

			read += len(wb)
		}
	}()

	type wErr struct {
		off int64
		err error
	}
	errCh := make(chan wErr)

	var wg sync.WaitGroup
	wg.Add(concurrency)
	for i := 0; i < concurrency; i++ {
		// Map_i: each worker gets work, and does the Write from each buffer to its respective offset.
		go func() {
			defer wg.Done()

			for work := range workCh {
				s := <-work.res
				pool.Put(work.res)

				err := s.err
				if err == nil {
					switch s.typ {
					case sshFxpStatus:
						err = normaliseError(unmarshalStatus(work.id, s.data))
					default:
						err = unimplementedPacketErr(s.typ)
					}
				}

				if err != nil {
					errCh <- wErr{work.off, err}
				}
			}
		}()
	}

	// Wait for long tail, before closing results.
	go func() {
		wg.Wait()
		close(errCh)
	}()

	// Reduce: collect all the results into a relevant return: the earliest offset to return an error.
	firstErr := wErr{math.MaxInt64, nil}
	for wErr := range errCh {
		if wErr.off <= firstErr.off {
			firstErr = wErr
		}

		select {
		case <-cancel:
		default:
			// stop any more work from being distributed. (Just in case.)
			close(cancel)
		}
	}

	if firstErr.err != nil {
		// firstErr.err != nil if and only if firstErr.off >= our starting offset.
		return int(firstErr.off - off), firstErr.err
	}

	return len(b), nil
}

// WriteAt writes up to len(b) byte to the File at a given offset `off`. It returns
// the number of bytes written and an error, if any. WriteAt follows io.WriterAt semantics,
// so the file offset is not altered during the write.
func (f *File) WriteAt(b []byte, off int64) (written int, err error) {
	f.mu.RLock()
	defer f.mu.RUnlock()

	if f.handle == "" {
		return 0, os.ErrClosed
	}

	return f.writeAt(b, off)
}

// writeAt must be called while holding either the Read or Write mutex in File.
// This code is concurrent safe with itself, but not with Close.
func (f *File) writeAt(b []byte, off int64) (written int, err error) {
	// hostgate (change 27): the server's limits, waited for until f's Abort.
	if err := f.waitLimits(); err != nil {
		return 0, err
	}
	chunkSize := f.c.writeSizeNow() // hostgate (change 8): no more than the server takes
	if len(b) <= chunkSize {
		// We can do this in one write.
		return f.writeChunkAt(nil, b, off)
	}

	if f.c.useConcurrentWrites {
		return f.writeAtConcurrent(b, off)
	}

	ch := make(chan result, 1) // reusable channel

	for written < len(b) {
		wb := b[written:]
		if len(wb) > chunkSize {
			wb = wb[:chunkSize]
		}

		n, err := f.writeChunkAt(ch, wb, off+int64(written))
		if n > 0 {
			written += n
		}

		if err != nil {
			return written, err
		}
	}

	return len(b), nil
}

// ReadFromWithConcurrency implements ReaderFrom,
// but uses the given concurrency to issue multiple requests at the same time.
//
// Giving a concurrency of less than one will default to the Client’s max concurrency.
//
// Otherwise, the given concurrency will be capped by the Client's max concurrency.
//
// When one needs to guarantee concurrent reads/writes, this method is preferred
// over ReadFrom.
func (f *File) ReadFromWithConcurrency(r io.Reader, concurrency int) (read int64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()

	return f.readFromWithConcurrency(r, concurrency)
}

func (f *File) readFromWithConcurrency(r io.Reader, concurrency int) (read int64, err error) {
	if f.handle == "" {
		return 0, os.ErrClosed
	}

	// hostgate (change 27): the server's limits, waited for until f's Abort.
	if err := f.waitLimits(); err != nil {
		return 0, err
	}

	// Split the write into multiple maxPacket sized concurrent writes.
	// This allows writes with a suitably large reader
	// to transfer data at a much faster rate due to overlapping round trip times.

	cancel := make(chan struct{})

	type work struct {
		id  uint32
		res chan result

		off int64
	}
	workCh := make(chan work)

	type rwErr struct {
		off int64
		err error
	}
	errCh := make(chan rwErr)

	// hostgate (change 8): writes of no more than the server takes, as
	// many more of them as keep the bytes in flight.
	chunkSize := f.c.writeSizeNow()
	if concurrency >= f.c.maxConcurrentRequests || concurrency < 1 {
		concurrency = f.c.requestsFor(chunkSize)
	}

	pool := newResChanPool(concurrency)

	// Slice: cut up the Read into any number of buffers of length <= f.c.maxPacket, and at appropriate offsets.
	go func() {
		defer close(workCh)

		b := make([]byte, chunkSize)
		off := f.offset

		for {
			// Fill the entire buffer.
			n, err := readFull(r, b)

			if n > 0 {
				read += int64(n)

				id := f.c.nextID()
				res := pool.Get()

				f.c.dispatchFor(f, res, &sshFxpWritePacket{
					ID:     id,
					Handle: f.handle,
					Offset: uint64(off),
					Length: uint32(n),
					Data:   b[:n],
				})

				select {
				case workCh <- work{id, res, off}:
				case <-cancel:
					return
				}

				off += int64(n)
			}

			if err != nil {
				if !errors.Is(err, io.EOF) {
					errCh <- rwErr{off, err}
				}
				return
			}
		}
	}()

	var wg sync.WaitGroup
	wg.Add(concurrency)
	for i := 0; i < concurrency; i++ {
		// Map_i: each worker gets work, and does the Write from each buffer to its respective offset.
		go func() {
			defer wg.Done()

			for work := range workCh {
				s := <-work.res
				pool.Put(work.res)

				err := s.err
				if err == nil {
					switch s.typ {
					case sshFxpStatus:
						err = normaliseError(unmarshalStatus(work.id, s.data))
					default:
						err = unimplementedPacketErr(s.typ)
					}
				}

				if err != nil {
					errCh <- rwErr{work.off, err}

					// DO NOT return.
					// We want to ensure that workCh is drained before wg.Wait returns.
				}
			}
		}()
	}

	// Wait for long tail, before closing results.
	go func() {
		wg.Wait()
		close(errCh)
	}()

	// Reduce: Collect all the results into a relevant return: the earliest offset to return an error.
	firstErr := rwErr{math.MaxInt64, nil}
	for rwErr := range errCh {
		if rwErr.off <= firstErr.off {
			firstErr = rwErr
		}

		select {
		case <-cancel:
		default:
			// stop any more work from being distributed.
			close(cancel)
		}
	}

	if firstErr.err != nil {
		// firstErr.err != nil if and only if firstErr.off is a valid offset.
		//
		// firstErr.off will then be the lesser of:
		// * the offset of the first error from writing,
		// * the last successfully read offset.
		//
		// This could be less than the last successfully written offset,
		// which is the whole reason for the UseConcurrentWrites() ClientOption.
		//
		// Callers are responsible for truncating any SFTP files to a safe length.
		f.offset = firstErr.off

		// ReadFrom is defined to return the read bytes, regardless of any writer errors.
		return read, firstErr.err
	}

	f.offset += read
	return read, nil
}

// ReadFrom reads data from r until EOF and writes it to the file. The return
// value is the number of bytes read. Any error except io.EOF encountered
// during the read is also returned.
//
// This method is preferred over calling Write multiple times
// to maximise throughput for transferring the entire file,
// especially over high-latency links.
//
// To ensure concurrent writes, the given r needs to implement one of
// the following receiver methods:
//
//	Len()  int
//	Size() int64
//	Stat() (os.FileInfo, error)
//
// or be an instance of [io.LimitedReader] to determine the number of possible
// concurrent requests. Otherwise, reads/writes are performed sequentially.
// ReadFromWithConcurrency can be used explicitly to guarantee concurrent
// processing of the reader.
func (f *File) ReadFrom(r io.Reader) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()

	if f.handle == "" {
		return 0, os.ErrClosed
	}

	// hostgate (change 27): the server's limits, waited for until f's Abort.
	if err := f.waitLimits(); err != nil {
		return 0, err
	}

	if f.c.useConcurrentWrites {
		var remain int64
		switch r := r.(type) {
		case interface{ Len() int }:
			remain = int64(r.Len())

		case interface{ Size() int64 }:
			remain = r.Size()

		case *io.LimitedReader:
			remain = r.N

		case interface{ Stat() (os.FileInfo, error) }:
			info, err := r.Stat()
			if err == nil {
				remain = info.Size()
			}
		}

		if remain < 0 {
			// We can strongly assert that we want default max concurrency here.
			return f.readFromWithConcurrency(r, f.c.maxConcurrentRequests)
		}

		if chunkSize := f.c.writeSizeNow(); remain > int64(chunkSize) {
			// Otherwise, only use concurrency, if it would be at least two packets.

			// This is the best reasonable guess we can make.
			// hostgate (change 8): in writes the server takes.
			concurrency64 := remain/int64(chunkSize) + 1

			// We need to cap this value to an `int` size value to avoid overflow on 32-bit machines.
			// So, we may as well pre-cap it to `f.c.maxConcurrentRequests`.
			if concurrency64 > int64(f.c.maxConcurrentRequests) {
				concurrency64 = int64(f.c.maxConcurrentRequests)
			}

			return f.readFromWithConcurrency(r, int(concurrency64))
		}
	}

	ch := make(chan result, 1) // reusable channel

	b := make([]byte, f.c.writeSizeNow()) // hostgate (change 8)

	var read int64
	for {
		// Fill the entire buffer.
		n, err := readFull(r, b)
		if n < 0 {
			panic("sftp.File: reader returned negative count from Read")
		}

		if n > 0 {
			read += int64(n)

			m, err2 := f.writeChunkAt(ch, b[:n], f.offset)
			f.offset += int64(m)

			if err == nil || (err2 != nil && errors.Is(err, io.EOF)) {
				err = err2
			}
		}

		if err != nil {
			if errors.Is(err, io.EOF) {
				return read, nil // return nil explicitly.
			}

			return read, err
		}
	}
}

// readFull reads from r into b until b is full or r returns an error.
// Unlike io.ReadFull, it returns the error from r unchanged.
// io.ReadFull turns an io.EOF after a partial read into io.ErrUnexpectedEOF,
// which can't be told apart from an io.ErrUnexpectedEOF returned by r itself.
func readFull(r io.Reader, b []byte) (n int, err error) {
	for n < len(b) && err == nil {
		var nn int
		nn, err = r.Read(b[n:])
		n += nn
	}
	return n, err
}

// Seek implements io.Seeker by setting the client offset for the next Read or
// Write. It returns the next offset read. Seeking before or after the end of
// the file is undefined. Seeking relative to the end calls Stat.
func (f *File) Seek(offset int64, whence int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()

	if f.handle == "" {
		return 0, os.ErrClosed
	}

	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += f.offset
	case io.SeekEnd:
		fi, err := f.stat()
		if err != nil {
			return f.offset, err
		}
		offset += fi.Size()
	default:
		return f.offset, unimplementedSeekWhence(whence)
	}

	if offset < 0 {
		return f.offset, os.ErrInvalid
	}

	f.offset = offset
	return f.offset, nil
}

// Chown changes the uid/gid of the current file.
func (f *File) Chown(uid, gid int) error {
	f.mu.RLock()
	defer f.mu.RUnlock()

	if f.handle == "" {
		return os.ErrClosed
	}

	return f.c.fsetstat(f, f.handle, sshFileXferAttrUIDGID, &FileStat{
		UID: uint32(uid),
		GID: uint32(gid),
	})
}

// Chmod changes the permissions of the current file.
//
// See Client.Chmod for details.
func (f *File) Chmod(mode os.FileMode) error {
	f.mu.RLock()
	defer f.mu.RUnlock()

	if f.handle == "" {
		return os.ErrClosed
	}

	return f.c.fsetstat(f, f.handle, sshFileXferAttrPermissions, toChmodPerm(mode))
}

// SetExtendedData sets extended attributes of the current file. It uses the
// SSH_FILEXFER_ATTR_EXTENDED flag in the setstat request.
//
// This flag provides a general extension mechanism for vendor-specific extensions.
// Names of the attributes should be a string of the format "name@domain", where "domain"
// is a valid, registered domain name and "name" identifies the method. Server
// implementations SHOULD ignore extended data fields that they do not understand.
func (f *File) SetExtendedData(path string, extended []StatExtended) error {
	f.mu.RLock()
	defer f.mu.RUnlock()

	if f.handle == "" {
		return os.ErrClosed
	}

	attrs := &FileStat{
		Extended: extended,
	}

	return f.c.fsetstat(f, f.handle, sshFileXferAttrExtended, attrs)
}

// Truncate sets the size of the current file. Although it may be safely assumed
// that if the size is less than its current size it will be truncated to fit,
// the SFTP protocol does not specify what behavior the server should do when setting
// size greater than the current size.
// We send a SSH_FXP_FSETSTAT here since we have a file handle
func (f *File) Truncate(size int64) error {
	f.mu.RLock()
	defer f.mu.RUnlock()

	if f.handle == "" {
		return os.ErrClosed
	}

	return f.c.fsetstat(f, f.handle, sshFileXferAttrSize, uint64(size))
}

// Sync requests a flush of the contents of a File to stable storage.
//
// Sync requires the server to support the fsync@openssh.com extension.
func (f *File) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()

	if f.handle == "" {
		return os.ErrClosed
	}

	if data, ok := f.c.HasExtension(openssh.ExtensionFSync().Name); !ok || data != "1" {
		return &StatusError{
			Code: sshFxOPUnsupported,
			msg:  "fsync not supported",
		}
	}

	id := f.c.nextID()
	typ, data, err := f.c.sendPacketFor(context.Background(), f, nil, &sshFxpFsyncPacket{
		ID:     id,
		Handle: f.handle,
	})

	switch {
	case err != nil:
		return err
	case typ == sshFxpStatus:
		return normaliseError(unmarshalStatus(id, data))
	default:
		return &unexpectedPacketErr{want: sshFxpStatus, got: typ}
	}
}

// normaliseError normalises an error into a more standard form that can be
// checked against stdlib errors like io.EOF or os.ErrNotExist.
func normaliseError(err error) error {
	switch err := err.(type) {
	case *StatusError:
		switch err.Code {
		case sshFxEOF:
			return io.EOF
		case sshFxNoSuchFile:
			return os.ErrNotExist
		case sshFxPermissionDenied:
			return os.ErrPermission
		case sshFxOk:
			return nil
		default:
			return err
		}
	default:
		return err
	}
}

// flags converts the flags passed to OpenFile into ssh flags.
// Unsupported flags are ignored.
func toPflags(f int) uint32 {
	var out uint32
	switch f & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR) {
	case os.O_RDONLY:
		out |= sshFxfRead
	case os.O_WRONLY:
		out |= sshFxfWrite
	case os.O_RDWR:
		out |= sshFxfRead | sshFxfWrite
	}
	if f&os.O_APPEND == os.O_APPEND {
		out |= sshFxfAppend
	}
	if f&os.O_CREATE == os.O_CREATE {
		out |= sshFxfCreat
	}
	if f&os.O_TRUNC == os.O_TRUNC {
		out |= sshFxfTrunc
	}
	if f&os.O_EXCL == os.O_EXCL {
		out |= sshFxfExcl
	}
	return out
}

// toChmodPerm converts Go permission bits to POSIX permission bits.
//
// This differs from fromFileMode in that we preserve the POSIX versions of
// setuid, setgid and sticky in m, because we've historically supported those
// bits, and we mask off any non-permission bits.
func toChmodPerm(m os.FileMode) (perm uint32) {
	const mask = os.ModePerm | os.FileMode(s_ISUID|s_ISGID|s_ISVTX)
	perm = uint32(m & mask)

	if m&os.ModeSetuid != 0 {
		perm |= s_ISUID
	}
	if m&os.ModeSetgid != 0 {
		perm |= s_ISGID
	}
	if m&os.ModeSticky != 0 {
		perm |= s_ISVTX
	}

	return perm
}
