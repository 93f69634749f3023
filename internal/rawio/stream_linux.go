//go:build linux

package rawio

import "syscall"

// Stream reads and writes a non-blocking descriptor with the raw calls
// above, in the callbacks of its RawConn, which waits in the netpoller
// (and keeps the descriptor's deadlines) while it has nothing to give or
// no room. One reader and one writer at a time. The callbacks and what
// they work on live here rather than in closures, which would be
// allocated at every call.
type Stream struct {
	raw      syscall.RawConn
	rfn, wfn func(fd uintptr) bool
	rp, wp   []byte
	rn, wn   int
	rerr     syscall.Errno
	werr     syscall.Errno
}

// NewStream returns the Stream of raw, a RawConn of a descriptor in
// non-blocking mode (a net.Conn's, or an *os.File's that the runtime
// polls): on a blocking one a raw call would hold its P, and the thread,
// for as long as the descriptor waits.
func NewStream(raw syscall.RawConn) *Stream {
	s := &Stream{raw: raw}
	s.rfn, s.wfn = s.readOnce, s.writeOnce
	return s
}

// Read reads once into p (not empty), waiting until there is something to
// read: n bytes; 0 with neither error at the end of the stream; errno
// where the read failed; err where the RawConn did (closed, a deadline).
func (s *Stream) Read(p []byte) (n int, errno syscall.Errno, err error) {
	s.rp, s.rn, s.rerr = p, 0, 0
	err = s.raw.Read(s.rfn)
	s.rp = nil
	if err != nil {
		return 0, 0, err
	}
	return s.rn, s.rerr, nil
}

func (s *Stream) readOnce(fd uintptr) bool {
	n, e := Read(fd, s.rp)
	switch e {
	case 0:
		s.rn = n
	case syscall.EAGAIN:
		return false
	default:
		s.rerr = e
	}
	return true
}

// Write writes all of p (not empty), waiting for room as it needs: the
// bytes written, all of p unless errno (the write failed) or err (the
// RawConn did) says why not.
func (s *Stream) Write(p []byte) (n int, errno syscall.Errno, err error) {
	s.wp, s.wn, s.werr = p, 0, 0
	err = s.raw.Write(s.wfn)
	s.wp = nil
	if s.werr != 0 {
		return s.wn, s.werr, nil
	}
	return s.wn, 0, err
}

func (s *Stream) writeOnce(fd uintptr) bool {
	for s.wn < len(s.wp) {
		n, e := Write(fd, s.wp[s.wn:])
		switch e {
		case 0:
			s.wn += n
		case syscall.EAGAIN:
			return false
		default:
			s.werr = e
			return true
		}
	}
	return true
}
