package sshlayer

import (
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"math"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/hostgate/hostgate/third_party/github.com/pkg/sftp"
)

// SFTP v3 packet types and status codes sftpCompat reads and writes (the
// other status codes are in sftp_provider.go).
const (
	fxpVersion       = 2
	fxpRemove        = 13
	fxpRmdir         = 15
	fxpRealpath      = 16
	fxpSymlink       = 20
	fxpStatus        = 101
	fxpName          = 104
	fxpExtended      = 200
	fxpExtendedReply = 201

	fxOK           = 0
	fxFailure      = 4
	fxBadMessage   = 5
	sftpCompatMax  = 64 << 10  // an answered request: a few paths
	sftpHeaderSize = 5         // uint32 length, byte type
	sftpMaxMessage = 256 << 10 // the longest packet pkg/sftp's server reads, as OpenSSH's
)

// sftpCompat sits between a session channel and pkg/sftp's server and
// answers the requests pkg/sftp answers differently from OpenSSH's
// sftp-server, which clients (ours included) are written against:
//   - SYMLINK: pkg/sftp resolves a relative target against its working
//     directory, so a link to "target" pointed at DIR/target wherever the
//     link was; the target is stored as given, as ln -s and OpenSSH do.
//   - REALPATH: pkg/sftp only cleans the path; OpenSSH resolves symlinks
//     (realpath(3)), the last component being allowed not to exist.
//   - REMOVE and RMDIR: pkg/sftp does both with os.Remove, which deletes
//     a file or an empty directory, so OpenSSH's `sftp rmdir FILE`
//     deleted the file; they are unlink(2) and rmdir(2), as OpenSSH's, and
//     a client that means either (pkg/sftp's Client.Remove) tries both.
//
// It answers posix-rename@openssh.com itself, with rename(2): pkg/sftp
// uses os.Rename, which refuses to replace a directory, even an empty one.
//
// It also adds OpenSSH extensions pkg/sftp lacks to the VERSION answer,
// and answers them: expand-path@openssh.com, through which newer OpenSSH
// sftp clients resolve "~" and "~/x" (without it they ask for a directory
// named "~"), and users-groups-by-id@openssh.com, through which OpenSSH's
// sftp (9.1 and later) names owners in `ls -l` (without it, `ls -l FILE`
// showed "0 0" where sshd shows "root root"), and limits@openssh.com, so
// that OpenSSH's sftp sends requests of 255 KiB, not 32 KiB (see limits).
//
// Every other packet passes through untouched. Ours are done only once
// pkg/sftp has answered every request before them (both servers act in
// request order), and answered between pkg/sftp's packets, never inside
// one.
type sftpCompat struct {
	ch      io.ReadWriteCloser
	dir     string                          // relative paths are relative to it (pkg/sftp's working directory)
	symlink func(target, link string) error // os.Symlink; tests replace it
	rename  func(from, to string) error     // rename(2); tests replace it
	unlink  func(name string) error         // unlink(2), for REMOVE; tests replace it
	rmdir   func(name string) error         // rmdir(2), for RMDIR; tests replace it

	// Read side, used only by pkg/sftp's reading goroutine.
	buf      []byte // read from ch, not yet handed on
	store    []byte // buf's backing array, reused
	passLeft int    // bytes of a passed-through packet still to hand on
	passed   int64  // packets handed to pkg/sftp (guarded by wmu)

	// Write side: pkg/sftp's writes and ours, kept packet-whole.
	wmu     sync.Mutex
	wcond   *sync.Cond
	outHdr  []byte // the start of the length prefix of pkg/sftp's next packet
	outLeft int    // bytes of pkg/sftp's current packet still to come
	werr    error  // the channel failed or closed: no packet will complete
	sent    int64  // packets pkg/sftp has written: one answer per request
	version []byte // pkg/sftp's first packet (VERSION) while it is incomplete
	started bool   // the first packet went out
}

func newSFTPCompat(ch io.ReadWriteCloser, dir string) *sftpCompat {
	c := &sftpCompat{ch: ch, dir: dir, symlink: os.Symlink, rename: syscall.Rename, unlink: syscall.Unlink, rmdir: syscall.Rmdir}
	c.wcond = sync.NewCond(&c.wmu)
	return c
}

func (c *sftpCompat) Close() error {
	c.wmu.Lock()
	if c.werr == nil {
		c.werr = net.ErrClosed
	}
	c.wcond.Broadcast()
	c.wmu.Unlock()
	return c.ch.Close()
}

// Read hands pkg/sftp the incoming packets it should answer.
func (c *sftpCompat) Read(p []byte) (int, error) {
	for {
		if c.passLeft > 0 && len(c.buf) > 0 {
			n := copy(p, c.buf[:min(len(c.buf), c.passLeft)])
			c.buf = c.buf[n:]
			c.passLeft -= n
			return n, nil
		}
		if c.passLeft > 0 {
			// The rest of a passed packet: straight from the channel.
			n, err := c.ch.Read(p[:min(len(p), c.passLeft)])
			c.passLeft -= n
			return n, err
		}
		if len(c.buf) >= sftpHeaderSize {
			length := binary.BigEndian.Uint32(c.buf)
			typ := c.buf[4]
			// On a 32-bit board 4+int(length) from 2^31-4 on was negative
			// or small: a slice out of range, a panic of the agent, or a
			// loop that handed nothing on for ever.
			total := packetTotal(length)
			if typ == fxpExtended && length <= sftpCompatMax && len(c.buf) < total {
				// Which extension it is comes after the id: the whole
				// (small) packet first.
				if err := c.fill(); err != nil {
					return 0, err
				}
				continue
			}
			if !answered(typ) && !ourExtension(c.buf[:min(len(c.buf), total)]) || length < 1 || length > sftpCompatMax {
				c.passLeft = total
				c.wmu.Lock()
				c.passed++
				c.wmu.Unlock()
				continue
			}
			if len(c.buf) >= total {
				pkt := c.buf[4 : 4+length]
				c.buf = c.buf[4+length:]
				if err := c.answer(pkt); err != nil {
					return 0, err
				}
				continue
			}
		}
		if err := c.fill(); err != nil {
			if len(c.buf) > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
	}
}

// packetTotal is the bytes of a packet whose header says length, its 4
// bytes of length included, as an int on every board: on a 32-bit one a
// length past math.MaxInt-4 counts as math.MaxInt (pkg/sftp refuses any
// past sftpMaxMessage at its header anyway).
func packetTotal(length uint32) int {
	if uint64(length) > math.MaxInt-4 {
		return math.MaxInt
	}
	return 4 + int(length)
}

// fill reads more of the channel into buf.
func (c *sftpCompat) fill() error {
	if len(c.buf) == cap(c.buf) {
		if len(c.buf) >= cap(c.store) {
			c.store = make([]byte, max(2*cap(c.store), 4<<10))
		}
		c.buf = c.store[:copy(c.store, c.buf)]
	}
	n, err := c.ch.Read(c.buf[len(c.buf):cap(c.buf)])
	c.buf = c.buf[:len(c.buf)+n]
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// answered reports whether sftpCompat answers requests of type typ
// (EXTENDED ones only when ourExtension).
func answered(typ byte) bool {
	return typ == fxpSymlink || typ == fxpRealpath || typ == fxpRemove || typ == fxpRmdir
}

// answer handles one packet answered or ourExtension picked (type byte
// first), once pkg/sftp has answered every request before it: both
// servers act on requests in order (a MKDIR then a SYMLINK into it, sent
// together, must find the directory).
func (c *sftpCompat) answer(pkt []byte) error {
	c.wmu.Lock()
	for c.werr == nil && c.sent < c.passed {
		c.wcond.Wait()
	}
	c.wmu.Unlock()
	typ, rest := pkt[0], pkt[1:]
	id, rest, ok := sftpUint32(rest)
	if !ok {
		return errors.New("sshlayer: sftp: short packet")
	}
	switch typ {
	case fxpExtended: // one of ourExtension's
		name, rest, _ := sftpString(rest)
		if name == extUsersGroupsByID {
			return c.usersGroups(id, rest)
		}
		if name == extLimits {
			return c.limits(id)
		}
		if name == extPosixRename {
			from, rest, ok1 := sftpString(rest)
			to, _, ok2 := sftpString(rest)
			if !ok1 || !ok2 {
				return c.writeStatus(id, fxBadMessage, "malformed posix-rename")
			}
			if err := c.rename(c.local(from), c.local(to)); err != nil {
				return c.writeErrno(id, &os.LinkError{Op: "rename", Old: from, New: to, Err: err})
			}
			return c.writeStatus(id, fxOK, "")
		}
		p, _, ok := sftpString(rest)
		if !ok {
			return c.writeStatus(id, fxBadMessage, "malformed expand-path")
		}
		p, err := c.expand(p)
		if err != nil {
			return c.writeStatus(id, statusCode(err), err.Error())
		}
		return c.writeName(id, p)
	case fxpSymlink:
		target, rest, ok1 := sftpString(rest)
		link, _, ok2 := sftpString(rest)
		if !ok1 || !ok2 {
			return c.writeStatus(id, fxBadMessage, "malformed SYMLINK")
		}
		// OpenSSH's order: the target, then the link.
		if err := c.symlink(target, c.local(link)); err != nil {
			return c.writeErrno(id, &os.LinkError{Op: "symlink", Old: target, New: link, Err: unwrapLinkErr(err)})
		}
		return c.writeStatus(id, fxOK, "")
	case fxpRemove, fxpRmdir:
		name, _, ok := sftpString(rest)
		if !ok {
			return c.writeStatus(id, fxBadMessage, "malformed REMOVE or RMDIR")
		}
		remove := c.unlink
		if typ == fxpRmdir {
			remove = c.rmdir
		}
		// OpenSSH's answer to a directory given to REMOVE (EISDIR) and to
		// a non-empty one given to RMDIR is a plain failure, as here.
		if err := remove(c.local(name)); err != nil {
			return c.writeStatus(id, statusCode(err), err.Error())
		}
		return c.writeStatus(id, fxOK, "")
	default: // fxpRealpath
		name, _, ok := sftpString(rest)
		if !ok {
			return c.writeStatus(id, fxBadMessage, "malformed REALPATH")
		}
		return c.writeName(id, name)
	}
}

// writeName answers REALPATH and expand-path: name resolved as OpenSSH's
// realpath does, in a NAME packet.
func (c *sftpCompat) writeName(id uint32, name string) error {
	real, err := realpath(c.local(name))
	if err != nil {
		return c.writeStatus(id, statusCode(err), err.Error())
	}
	b := sftpPacket(fxpName, id)
	b = binary.BigEndian.AppendUint32(b, 1)
	b = sftpAppendString(b, real)
	b = sftpAppendString(b, real)
	b = binary.BigEndian.AppendUint32(b, 0) // no attributes
	return c.writePacket(b)
}

// The extensions sftpCompat answers: expand-path, which pkg/sftp lacks,
// and posix-rename, which pkg/sftp answers with os.Rename, which refuses
// to replace a directory (EEXIST) where rename(2), and OpenSSH, replace an
// empty one.
const (
	extExpandPath      = "expand-path@openssh.com"
	extPosixRename     = "posix-rename@openssh.com"
	extUsersGroupsByID = "users-groups-by-id@openssh.com"
	extLimits          = "limits@openssh.com"
)

// ourExtension reports whether pkt (length prefix first, whole) is an
// EXTENDED request sftpCompat answers.
func ourExtension(pkt []byte) bool {
	if len(pkt) < sftpHeaderSize || pkt[4] != fxpExtended || len(pkt) < packetTotal(binary.BigEndian.Uint32(pkt)) {
		return false
	}
	_, rest, ok := sftpUint32(pkt[5:])
	if !ok {
		return false
	}
	name, _, ok := sftpString(rest)
	return ok && (name == extExpandPath || name == extPosixRename || name == extUsersGroupsByID || name == extLimits)
}

// limits answers limits@openssh.com as OpenSSH's sftp-server does, for
// the requests pkg/sftp's server takes: packets of 256 KiB, reads and
// writes of sftpMaxPacket, and its bound on a session's open handles
// (sftp.MaxOpenHandles), which clients that read it do not go past. Told the
// limits, OpenSSH's sftp reads and writes in requests of 255 KiB where
// it sends 32 KiB to a server that does not say: an eighth of the
// requests and replies. By hand, a 256 MiB get took the agent 0.48-0.58
// s of CPU against 0.60-0.63 without the answer, and a put ran 1.15× as
// fast. Hostgate's client sizes its requests to sftpMaxPacket already.
func (c *sftpCompat) limits(id uint32) error {
	b := sftpPacket(fxpExtendedReply, id)
	b = binary.BigEndian.AppendUint64(b, sftpMaxMessage)
	b = binary.BigEndian.AppendUint64(b, sftpMaxPacket)
	b = binary.BigEndian.AppendUint64(b, sftpMaxPacket)
	b = binary.BigEndian.AppendUint64(b, sftp.MaxOpenHandles)
	return c.writePacket(b)
}

// usersGroups answers users-groups-by-id@openssh.com, as OpenSSH's
// PROTOCOL file has it: rest holds two strings of packed uint32 uids and
// gids; the reply names each in order, "" for an id without a name (a
// sandbox's uid).
func (c *sftpCompat) usersGroups(id uint32, rest []byte) error {
	uids, rest, ok1 := sftpString(rest)
	gids, _, ok2 := sftpString(rest)
	if !ok1 || !ok2 || len(uids)%4 != 0 || len(gids)%4 != 0 {
		return c.writeStatus(id, fxBadMessage, "malformed users-groups-by-id")
	}
	names := func(ids string, lookup func(string) string) []byte {
		var b []byte
		seen := map[uint32]string{} // a listing repeats ids; each is looked up once
		for i := 0; i < len(ids); i += 4 {
			n := binary.BigEndian.Uint32([]byte(ids[i : i+4]))
			name, ok := seen[n]
			if !ok {
				name = lookup(strconv.FormatUint(uint64(n), 10))
				seen[n] = name
			}
			b = sftpAppendString(b, name)
		}
		return b
	}
	b := sftpPacket(fxpExtendedReply, id)
	b = sftpAppendString(b, string(names(uids, func(s string) string {
		u, err := user.LookupId(s)
		if err != nil {
			return ""
		}
		return u.Username
	})))
	b = sftpAppendString(b, string(names(gids, func(s string) string {
		g, err := user.LookupGroupId(s)
		if err != nil {
			return ""
		}
		return g.Name
	})))
	return c.writePacket(b)
}

// expand does what OpenSSH's expand-path does before resolving: "~" and
// "~/…" are the home directory (the server's working directory, where
// sshd's sftp-server starts too), "~user/…" that user's.
func (c *sftpCompat) expand(p string) (string, error) {
	if !strings.HasPrefix(p, "~") {
		return p, nil
	}
	name, rest, _ := strings.Cut(p[1:], "/")
	home := c.dir
	if name != "" {
		u, err := user.Lookup(name)
		if err != nil {
			return "", &fs.PathError{Op: "expand-path", Path: p, Err: fs.ErrNotExist}
		}
		home = u.HomeDir
	}
	if rest == "" {
		return home, nil
	}
	return home + "/" + rest, nil
}

// local is name as the server sees it: relative to dir. It is not
// cleaned: ".." after a symlink is the symlink target's parent, which only
// resolving finds.
func (c *sftpCompat) local(name string) string {
	if name == "" {
		name = "."
	}
	if !filepath.IsAbs(name) {
		name = c.dir + "/" + name
	}
	return name
}

// evalSymlinksLoop is filepath.EvalSymlinks' error for a symlink loop, a
// plain string without the errno.
const evalSymlinksLoop = "EvalSymlinks: too many links"

// realpath resolves every symlink in name as OpenSSH's sftp_realpath does:
// the last component may be missing (a path about to be created), also
// when it is reached through a dangling symlink.
func realpath(name string) (string, error) {
	for range 40 { // symlinks followed, as the kernel's limit
		real, err := filepath.EvalSymlinks(name)
		if err != nil && err.Error() == evalSymlinksLoop {
			// A loop, which OpenSSH answers as "no such file" (ELOOP),
			// where filepath's error made a Failure of it.
			return "", &fs.PathError{Op: "realpath", Path: name, Err: syscall.ELOOP}
		}
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return real, err
		}
		dir, base := filepath.Split(name)
		parent, perr := filepath.EvalSymlinks(dir)
		if perr != nil || base == "" || base == "." || base == ".." {
			return "", err
		}
		target, lerr := os.Readlink(filepath.Join(parent, base))
		if lerr != nil {
			return filepath.Join(parent, base), nil // missing: named as asked
		}
		if !filepath.IsAbs(target) {
			target = parent + "/" + target
		}
		name = target // a dangling symlink: what it points at
	}
	return "", &fs.PathError{Op: "realpath", Path: name, Err: syscall.ELOOP}
}

func statusCode(err error) uint32 {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ELOOP):
		return fxNoSuchFile
	case errors.Is(err, fs.ErrPermission):
		return fxPermissionDenied
	}
	return fxFailure
}

// writeErrno answers a SYMLINK or a posix-rename that failed with err as
// pkg/sftp's server answers its own requests (statusFromError): "no such
// file" for ENOENT, "permission denied" for EACCES and EPERM, and for
// every other errno a Failure whose text names the paths and the errno in
// Go's words ("rename a file/x: not a directory"), which hostgate's client
// reads (failureErrno). statusCode's OpenSSH mapping said "no such file"
// for ENOTDIR and ELOOP, where the server's STAT or OPEN of the same path
// says which: a client learnt ENOTDIR from a Rename or Symlink through a
// file only by looking the names up again (2 or 4 more requests for a
// Rename, 1 for a Symlink). REMOVE, RMDIR and REALPATH keep OpenSSH's
// words, which OpenSSH's sftp prints.
func (c *sftpCompat) writeErrno(id uint32, err error) error {
	code := uint32(fxFailure)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		code = fxNoSuchFile
	case errors.Is(err, fs.ErrPermission):
		code = fxPermissionDenied
	}
	return c.writeStatus(id, code, err.Error())
}

// unwrapLinkErr is the errno in os.Symlink's *os.LinkError, whose names
// are the server's (the link made absolute): the answer names them as the
// client gave them.
func unwrapLinkErr(err error) error {
	if le, ok := err.(*os.LinkError); ok {
		return le.Err
	}
	return err
}

func (c *sftpCompat) writeStatus(id, code uint32, msg string) error {
	b := sftpPacket(fxpStatus, id)
	b = binary.BigEndian.AppendUint32(b, code)
	b = sftpAppendString(b, msg)
	b = sftpAppendString(b, "") // language tag
	return c.writePacket(b)
}

// writePacket writes one of our packets (length prefix still zero)
// between pkg/sftp's packets.
func (c *sftpCompat) writePacket(b []byte) error {
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for c.werr == nil && (c.outLeft > 0 || len(c.outHdr) > 0) {
		c.wcond.Wait()
	}
	if c.werr != nil {
		return c.werr
	}
	_, err := c.ch.Write(b)
	if err != nil {
		c.werr = err
	}
	return err
}

// Write passes pkg/sftp's output on, following its packet boundaries.
// Its first packet, the VERSION answer, is held until whole and goes out
// with our extension added.
func (c *sftpCompat) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.started {
		c.version = append(c.version, p...)
		if len(c.version) < sftpHeaderSize {
			return len(p), nil
		}
		total := 4 + int(binary.BigEndian.Uint32(c.version))
		if len(c.version) < total && total <= sftpCompatMax {
			return len(p), nil
		}
		c.started = true
		first := c.version
		c.version = nil
		if len(first) >= total && first[4] == fxpVersion {
			v := append([]byte(nil), first[:total]...)
			for _, ext := range []string{extExpandPath, extUsersGroupsByID, extLimits} {
				v = sftpAppendString(v, ext)
				v = sftpAppendString(v, "1")
			}
			binary.BigEndian.PutUint32(v, uint32(len(v)-4))
			if _, err := c.ch.Write(v); err != nil {
				c.werr = err
				c.wcond.Broadcast()
				return 0, err
			}
			c.sent++
			c.wcond.Broadcast() // a request sent right after INIT waits for this answer
			first = first[total:]
		}
		if _, err := c.write(first); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.write(p)
}

// write passes p on, counting pkg/sftp's packets; wmu is held.
func (c *sftpCompat) write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	n, err := c.ch.Write(p)
	for q := p[:n]; len(q) > 0; {
		if c.outLeft > 0 {
			k := min(len(q), c.outLeft)
			c.outLeft -= k
			q = q[k:]
			if c.outLeft == 0 {
				c.sent++
			}
			continue
		}
		k := min(len(q), 4-len(c.outHdr))
		c.outHdr = append(c.outHdr, q[:k]...)
		q = q[k:]
		if len(c.outHdr) == 4 {
			c.outLeft = int(binary.BigEndian.Uint32(c.outHdr))
			c.outHdr = c.outHdr[:0]
			if c.outLeft == 0 {
				c.sent++
			}
		}
	}
	if err != nil && c.werr == nil {
		// pkg/sftp will not finish this packet: answers must not wait for it.
		c.werr = err
	}
	if c.werr != nil || c.outLeft == 0 && len(c.outHdr) == 0 {
		c.wcond.Broadcast()
	}
	return n, err
}

func sftpPacket(typ byte, id uint32) []byte {
	b := make([]byte, 4, 64)
	b = append(b, typ)
	return binary.BigEndian.AppendUint32(b, id)
}

func sftpAppendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func sftpUint32(b []byte) (uint32, []byte, bool) {
	if len(b) < 4 {
		return 0, b, false
	}
	return binary.BigEndian.Uint32(b), b[4:], true
}

func sftpString(b []byte) (string, []byte, bool) {
	n, b, ok := sftpUint32(b)
	if !ok || uint32(len(b)) < n {
		return "", b, false
	}
	return string(b[:n]), b[n:], true
}
