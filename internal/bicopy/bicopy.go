// Package bicopy is the one bidirectional copy helper every tunnel and
// forward uses: bytes flow both ways, a finished direction is half-closed
// (CloseWrite) where the stream supports it, an error or ctx ending tears
// both ends down, and both ends are closed before Copy returns. Where the
// kernel can move the bytes (two sockets; on Linux a pipe and a TCP conn,
// `gateway proxy`'s direct sessions) it does. DialLead, which a forward
// calls before Copy, sends what a new client says first along with an
// early dial.
package bicopy

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"

	"github.com/hostgate/hostgate/internal/rawio"
)

// Stats counts the bytes Copy moved.
type Stats struct {
	AToB int64 // bytes read from a and written to b
	BToA int64
}

type closeWriter interface{ CloseWrite() error }

// Copy buffers: every direction starts with a small one (32 KiB, io.Copy's
// size and an SSH channel packet) and moves to a big one while reads fill
// it. A bulk stream then crosses each hop in 256 KiB writes — a quarter of
// the syscalls, frames and wakeups downstream — while an idle or
// interactive session, whose copier sits in Read, holds only the small one.
const (
	smallBuf = 32 << 10
	bigBuf   = 256 << 10
)

var (
	smallPool = sync.Pool{New: func() any { b := make([]byte, smallBuf); return &b }}
	bigPool   = sync.Pool{New: func() any { b := make([]byte, bigBuf); return &b }}
)

// copyHalf copies src to dst like io.Copy, with the adaptive buffer. Where
// the kernel can move the bytes (kernelCopy) io.Copy's fast path is taken
// instead; not merely because one side has ReadFrom or WriteTo:
// *net.TCPConn has both, and for any other peer (an SSH channel, a yamux
// stream) they fall back to io.Copy with a new 32 KiB buffer — 64 KiB of
// garbage per forwarded connection. Between a pipe and a TCP conn the
// kernel moves them too, by a splice of this package's (spliceHalf).
func copyHalf(dst io.Writer, src io.Reader) (int64, error) {
	if kernelCopy(dst, src) {
		return io.Copy(dst, src)
	}
	if n, ok, err := spliceHalf(dst, src); ok {
		return n, err
	}
	// A TCP end reads and writes by raw calls (internal/rawio says why: a
	// forward's 256 KiB writes to loopback outlast sysmon's 20 µs tick, as
	// the WebSocket's do); its waits stay in the netpoller, with the
	// conn's deadlines.
	if t := rawio.Raw(src); t != nil {
		src = t
	}
	if t := rawio.Raw(dst); t != nil {
		dst = t
	}
	sp := smallPool.Get().(*[]byte)
	defer smallPool.Put(sp)
	var bp *[]byte
	defer func() {
		if bp != nil {
			bigPool.Put(bp)
		}
	}()
	buf := *sp
	var (
		written  int64
		lastFull bool
	)
	for {
		nr, rerr := src.Read(buf)
		if nr > 0 {
			nw, werr := dst.Write(buf[:nr])
			if nw < 0 || nw > nr {
				nw, werr = 0, errors.New("bicopy: invalid write result")
			}
			written += int64(nw)
			if werr == nil && nw != nr {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				return written, werr
			}
		}
		if rerr != nil {
			if rerr == io.EOF {
				rerr = nil
			}
			return written, rerr
		}
		// A message-oriented source (a WebSocket) that filled the small
		// buffer answers the next read with the rest of its message: that
		// short read says nothing about the stream, so only a short read
		// after a short read shrinks the buffer.
		full := nr == len(buf)
		switch {
		case full && bp == nil:
			bp = bigPool.Get().(*[]byte)
			buf = *bp
		case !full && !lastFull && nr < smallBuf/2 && bp != nil:
			bigPool.Put(bp)
			bp, buf = nil, *sp
		}
		lastFull = full
	}
}

// Copy copies between a and b until both directions end, one fails, or ctx
// ends. It closes both a and b before returning. The error is the first
// non-EOF error, or ctx's error.
func Copy(ctx context.Context, a, b io.ReadWriteCloser) (Stats, error) {
	var (
		st      Stats
		once    sync.Once
		first   error
		wg      sync.WaitGroup
		closeAB = func() { _ = a.Close(); _ = b.Close() }
	)
	fail := func(err error) {
		once.Do(func() { first = err })
		closeAB()
	}
	cancelled := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { fail(ctx.Err()); close(cancelled) })

	half := func(dst, src io.ReadWriteCloser, n *int64) {
		c, err := copyHalf(dst, src)
		*n = c
		if err != nil && !isClosed(err) {
			fail(err)
			return
		}
		// src reached EOF: tell dst, or close it when it cannot half-close.
		if cw, ok := dst.(closeWriter); ok {
			if cw.CloseWrite() == nil {
				return
			}
		}
		closeAB()
	}
	// One direction runs here, not in a goroutine of its own: a forwarded
	// connection is short, and a goroutine started and a waiter woken at
	// its end are each a thread wake-up on an idle Go process, the cost
	// that dominates a small forwarded request (bench/HISTORY.md, round
	// 25). a to b runs here because it usually ends last (the target
	// answers and closes, then the client), so the wait below seldom
	// blocks.
	wg.Go(func() { half(a, b, &st.BToA) })
	half(b, a, &st.AToB)
	wg.Wait()
	closeAB()
	// If ctx ended, its callback may still be writing first: wait for it.
	if !stop() {
		<-cancelled
	}
	return st, first
}

// kernelCopy reports whether io.Copy(dst, src) moves the bytes in the
// kernel: splice between two sockets, sendfile or copy_file_range when a
// file meets a socket or a file. With anything else, *os.File's own
// ReadFrom/WriteTo fall back to io.Copy's fresh 32 KiB buffer too.
func kernelCopy(dst io.Writer, src io.Reader) bool {
	kernel := func(x any) bool {
		switch x.(type) {
		case *net.TCPConn, *net.UnixConn, *os.File:
			return true
		}
		return false
	}
	return kernel(dst) && kernel(src)
}

func isClosed(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, io.EOF)
}
