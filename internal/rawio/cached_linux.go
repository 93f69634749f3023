//go:build linux

package rawio

import (
	"io"
	"io/fs"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ReadCached reads into p (not empty), at the file position where off is
// -1 (which moves it) or else at off, only what the page cache holds: one
// preadv2(2) with RWF_NOWAIT, retrying EINTR. It answers the bytes read,
// 0 at the end of the file, or the errno: EAGAIN where the disk would be
// needed, others (ESPIPE, EOPNOTSUPP, EINVAL) where the descriptor never
// can be read so.
func ReadCached(fd uintptr, p []byte, off int64) (int, syscall.Errno) {
	iov := syscall.Iovec{Base: &p[0]}
	iov.SetLen(len(p))
	// The offset goes as two words, as x/sys/unix's Preadv2 passes it: on
	// 32-bit Linux the kernel joins them, so -1 (the file position) needs
	// its high word too; on 64-bit Linux the high word is ignored.
	lo, hi := uintptr(off), uintptr(uint64(off)>>(unsafe.Sizeof(uintptr(0))*8-1)>>1)
	for {
		r, _, e := syscall.RawSyscall6(unix.SYS_PREADV2, fd, uintptr(unsafe.Pointer(&iov)), 1, lo, hi, unix.RWF_NOWAIT)
		if e != syscall.EINTR {
			return int(r), e
		}
	}
}

// rawFile is what an *os.File offers, and what *os.File's WriteTo hands
// an io.Copy to a ReaderFrom: a wrapper embedding the *os.File (so
// pkg/sftp's ReadFrom, given it by io.Copy, cannot see the file).
type rawFile interface {
	io.Reader
	Stat() (fs.FileInfo, error)
	SyscallConn() (syscall.RawConn, error)
}

// CachedReader is r, reading what the page cache holds of a regular file
// by raw preadv2 at the file position (ReadCached), the rest by r's own
// Read; r itself where r is no regular file. For an upload's source: its
// reads of 255 KiB from the page cache take longer than sysmon's 20 µs
// tick, each one a P handed off and taken back (see the package doc).
func CachedReader(r io.Reader) io.Reader {
	f, ok := r.(rawFile)
	if !ok {
		return r
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return r
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return r
	}
	return &cachedReader{r: r, rc: rc}
}

type cachedReader struct {
	r     io.Reader
	rc    syscall.RawConn
	never bool // the file cannot be read so (its file system has no RWF_NOWAIT)
}

func (c *cachedReader) Read(p []byte) (int, error) {
	if len(p) > 0 && !c.never {
		var (
			n int
			e syscall.Errno
		)
		if err := c.rc.Control(func(fd uintptr) { n, e = ReadCached(fd, p, -1) }); err == nil {
			switch {
			case e == 0 && n > 0:
				return n, nil
			case e == 0 || e == syscall.EAGAIN:
				// The end (r's Read says io.EOF), or not cached.
			default:
				c.never = true
			}
		}
		// A closed file: r's Read says so.
	}
	return c.r.Read(p)
}
