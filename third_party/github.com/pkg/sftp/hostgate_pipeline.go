package sftp

// hostgate: change 3 (HOSTGATE.md). Requests sent without waiting for
// their replies. Every other call of the client sends one request and
// waits for its reply, so a caller that wants several requests in one
// round trip must run them on goroutines, and cannot choose the order they
// reach the server in. These send the request before they return, in the
// order they are called, and hand back a Pending whose Wait takes the
// reply.

import (
	"context"
	"io"
	"os"
	"path"
)

// Pending is a request already sent. Wait returns its reply. A reply that
// nobody waits for is dropped when it arrives (its memory left to the GC):
// the request still took effect on the server.
type Pending[T any] struct {
	id     uint32
	ch     chan result
	decode func(id uint32, r result) (T, error)
	// unsent is the error of a request that was not sent (change 29):
	// every Wait returns it, so that a caller whose WaitContext said
	// ctx's error may Wait again for a reply that might still come.
	unsent error
}

// Wait waits for the reply, or for the end of the connection
// (ErrSSHFxConnectionLost). Call it once.
func (p *Pending[T]) Wait() (T, error) {
	if p.unsent != nil {
		var zero T
		return zero, p.unsent
	}
	return p.take(<-p.ch)
}

// WaitContext is Wait, or ctx's error if ctx ends first (change 13): the
// reply is then dropped when it comes, as one nobody waits for. A server
// that never answers (a read of a hung mount, a broken server) held Wait
// until the connection ended.
func (p *Pending[T]) WaitContext(ctx context.Context) (T, error) {
	if p.unsent != nil {
		var zero T
		return zero, p.unsent
	}
	select {
	case r := <-p.ch:
		return p.take(r)
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

func (p *Pending[T]) take(r result) (T, error) {
	r.flatten() // hostgate: a data reply in the channel's packets
	defer r.release()
	if r.err != nil {
		var zero T
		return zero, r.err
	}
	return p.decode(p.id, r)
}

// sendContext is sendFor, of no File's, whose send waits no longer than ctx (change 29):
// a request that could not start before ctx ended is not sent, and its
// Wait returns ctx's error.
func sendContext[T any](ctx context.Context, c *Client, p idmarshaler, decode func(id uint32, r result) (T, error)) *Pending[T] {
	ch := make(chan result, 1)
	if err := c.dispatchContext(ctx, nil, ch, p); err != nil {
		return &Pending[T]{id: p.id(), unsent: err}
	}
	return &Pending[T]{id: p.id(), ch: ch, decode: decode}
}

// sendFor is send for a request of owner's, which owner's Abort fails
// (hostgate: change 15).
func sendFor[T any](c *Client, owner *File, p idmarshaler, decode func(id uint32, r result) (T, error)) *Pending[T] {
	ch := make(chan result, 1)
	c.dispatchFor(owner, ch, p)
	return &Pending[T]{id: p.id(), ch: ch, decode: decode}
}

func failed[T any](err error) *Pending[T] {
	ch := make(chan result, 1)
	ch <- result{err: err}
	return &Pending[T]{ch: ch}
}

// statusReply decodes a reply that is a status, OK or not.
func statusReply(id uint32, r result) (struct{}, error) {
	if r.typ != sshFxpStatus {
		return struct{}{}, unimplementedPacketErr(r.typ)
	}
	return struct{}{}, normaliseError(unmarshalStatus(id, r.data))
}

// OpenFileNoWait sends OpenFile's request.
func (c *Client) OpenFileNoWait(name string, flags int) *Pending[*File] {
	return c.OpenFileNoWaitContext(context.Background(), name, flags)
}

// OpenFileNoWaitContext is OpenFileNoWait whose send waits no longer than
// ctx (change 29): behind another request's send that waits on the SSH
// channel's window, which a host that stopped reading never grants. A
// request it could not send fails with ctx's error; one sent (in part)
// before ctx ended is answered, and a handle it opens is the caller's to
// close.
func (c *Client) OpenFileNoWaitContext(ctx context.Context, name string, flags int) *Pending[*File] {
	return sendContext(ctx, c, &sshFxpOpenPacket{ID: c.nextID(), Path: name, Pflags: toPflags(flags)}, func(id uint32, r result) (*File, error) {
		switch r.typ {
		case sshFxpHandle:
			data, err := unmarshalSID(id, r.data)
			if err != nil {
				return nil, err
			}
			handle, _, err := unmarshalStringSafe(data)
			if err != nil {
				return nil, err
			}
			return newFile(c, name, handle), nil
		case sshFxpStatus:
			return nil, normaliseError(unmarshalStatus(id, r.data))
		default:
			return nil, unimplementedPacketErr(r.typ)
		}
	})
}

// LstatNoWait sends Lstat's request.
func (c *Client) LstatNoWait(name string) *Pending[os.FileInfo] {
	return c.LstatNoWaitContext(context.Background(), name)
}

// LstatNoWaitContext is LstatNoWait whose send waits no longer than ctx,
// as OpenFileNoWaitContext's (change 29).
func (c *Client) LstatNoWaitContext(ctx context.Context, name string) *Pending[os.FileInfo] {
	return sendContext(ctx, c, &sshFxpLstatPacket{ID: c.nextID(), Path: name}, attrsReply(path.Base(name)))
}

func attrsReply(base string) func(id uint32, r result) (os.FileInfo, error) {
	return func(id uint32, r result) (os.FileInfo, error) {
		switch r.typ {
		case sshFxpAttrs:
			data, err := unmarshalSID(id, r.data)
			if err != nil {
				return nil, err
			}
			attr, _, err := unmarshalAttrs(data)
			if err != nil {
				return nil, err
			}
			return fileInfoFromStat(attr, base), nil
		case sshFxpStatus:
			return nil, normaliseError(unmarshalStatus(id, r.data))
		default:
			return nil, unimplementedPacketErr(r.typ)
		}
	}
}

// StatNoWait sends Stat's request (fstat on the handle).
func (f *File) StatNoWait() *Pending[os.FileInfo] {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.handle == "" {
		return failed[os.FileInfo](os.ErrClosed)
	}
	return sendFor(f.c, f, &sshFxpFstatPacket{ID: f.c.nextID(), Handle: f.handle}, attrsReply(path.Base(f.path)))
}

// ChmodNoWait sends Chmod's request (fsetstat on the handle).
func (f *File) ChmodNoWait(mode os.FileMode) *Pending[struct{}] {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.handle == "" {
		return failed[struct{}](os.ErrClosed)
	}
	return sendFor(f.c, f, &sshFxpFsetstatPacket{
		ID:     f.c.nextID(),
		Handle: f.handle,
		Flags:  sshFileXferAttrPermissions,
		Attrs:  toChmodPerm(mode),
	}, statusReply)
}

// ReadAtNoWait sends one read request for up to len(b) bytes at off (at
// most the client's packet size). Wait copies the reply into b and returns
// its length, which may be short of len(b) anywhere in the file (a server
// answers a read with what it has), and io.EOF at the end. b must stay
// untouched until Wait has returned; a reply not waited for never writes
// into it.
func (f *File) ReadAtNoWait(b []byte, off int64) *Pending[int] {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.handle == "" {
		return failed[int](os.ErrClosed)
	}
	if len(b) > f.c.maxPacket {
		b = b[:f.c.maxPacket]
	}
	return sendFor(f.c, f, &sshFxpReadPacket{
		ID:     f.c.nextID(),
		Handle: f.handle,
		Offset: uint64(off),
		Len:    uint32(len(b)),
	}, func(id uint32, r result) (int, error) {
		switch r.typ {
		case sshFxpData:
			data, err := unmarshalDataReply(id, r.data)
			if err != nil {
				return 0, err
			}
			if len(data) > len(b) {
				return 0, &StatusError{Code: sshFxBadMessage, msg: "read reply longer than asked for"}
			}
			return copy(b, data), nil
		case sshFxpStatus:
			err := normaliseError(unmarshalStatus(id, r.data))
			if err == nil {
				err = io.ErrUnexpectedEOF // an OK status is no answer to a read
			}
			return 0, err
		default:
			return 0, unimplementedPacketErr(r.typ)
		}
	})
}

// WriteAtNoWait sends one write request of b at off (at most the client's
// WriteSize: Wait returns how much of b the request carried). b is sent
// before it returns and not used after.
func (f *File) WriteAtNoWait(b []byte, off int64) *Pending[int] {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.handle == "" {
		return failed[int](os.ErrClosed)
	}
	// hostgate (change 27): the server's limits, waited for until f's
	// Abort, as the write's reply is.
	if err := f.waitLimits(); err != nil {
		return failed[int](err)
	}
	if size := f.c.writeSizeNow(); len(b) > size {
		b = b[:size] // hostgate (change 8): no more than the server takes
	}
	n := len(b)
	return sendFor(f.c, f, &sshFxpWritePacket{
		ID:     f.c.nextID(),
		Handle: f.handle,
		Offset: uint64(off),
		Length: uint32(n),
		Data:   b,
	}, func(id uint32, r result) (int, error) {
		if _, err := statusReply(id, r); err != nil {
			return 0, err
		}
		return n, nil
	})
}

// CloseNoWait sends Close's request. As with Close, the File is unusable
// once it returns.
func (f *File) CloseNoWait() *Pending[struct{}] {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.handle == "" {
		return failed[struct{}](os.ErrClosed)
	}
	handle := f.handle
	f.handle = ""
	// hostgate (change 15): the last request, not failed by Abort (see
	// Close); change 29: nor does it wait for the conn's send lock.
	id, ch := f.c.sendClose(handle)
	return &Pending[struct{}]{id: id, ch: ch, decode: statusReply}
}

// sendClose sends the close of handle from a goroutine, so that the
// caller never waits for the send (change 29): not for the conn's send
// lock, which a send may hold while it waits on a window the server does
// not grant (another File's write, or the rest of a packet cut short by
// Abort, change 16) for as long as the connection lasts, and not for
// that window itself. A close is what a caller sends on its way out, also
// once its ctx ended, and it must go all the same: not sent, the handle
// would stay open on the server for the session's life. When the lock is
// free it is taken before sendClose returns, so the close goes out before
// any request sent after it, as every NoWait request; when it is held,
// requests of others sent later may go first (nothing of the handle's is
// sent after its close). The goroutine ends once the request is out or
// the connection ended.
func (c *Client) sendClose(handle string) (uint32, chan result) {
	id := c.nextID()
	ch := make(chan result, 1)
	req := &sshFxpClosePacket{ID: id, Handle: handle}
	if c.conn.sendMu.tryLock() {
		go c.dispatchHeld(ch, req)
	} else {
		go c.dispatchRequest(ch, req)
	}
	return id, ch
}

// MaxPacket is the most data one read or write request of c carries.
func (c *Client) MaxPacket() int { return c.maxPacket }
