// Package bicopy is the one bidirectional copy helper every tunnel and
// forward uses: bytes flow both ways, a finished direction is half-closed
// (CloseWrite) where the stream supports it, an error or ctx ending tears
// both ends down, and both ends are closed before Copy returns.
package bicopy

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
)

// Stats counts the bytes Copy moved.
type Stats struct {
	AToB int64 // bytes read from a and written to b
	BToA int64
}

type closeWriter interface{ CloseWrite() error }

// bufPool holds copy buffers; 32 KiB matches io.Copy and the SSH channel
// packet size.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

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
		defer wg.Done()
		bp := bufPool.Get().(*[]byte)
		defer bufPool.Put(bp)
		c, err := io.CopyBuffer(dst, src, *bp)
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
	wg.Add(2)
	go half(b, a, &st.AToB)
	go half(a, b, &st.BToA)
	wg.Wait()
	closeAB()
	// If ctx ended, its callback may still be writing first: wait for it.
	if !stop() {
		<-cancelled
	}
	return st, first
}

func isClosed(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, io.EOF)
}
