package sftp

// hostgate: change 8 (HOSTGATE.md). Request sizes the server answers in
// full. A client that asks for more than a server answers a read with
// (OpenSSH's sftp-server before 8.6 answered 64 KiB, this package's
// server 32 KiB by default) gets each chunk in several sequential round
// trips (change 7); one whose writes are larger than a server takes is
// refused. The client asks the server's limits (limits@openssh.com) when
// it offers them, and otherwise takes the size of a short answer inside a
// file as the server's largest read, as OpenSSH's sftp does; later reads
// ask for that much, more of them at once, so that as many bytes are in
// flight.

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
)

const (
	extLimits = "limits@openssh.com"

	// MinReadSize is the smallest read size a short answer teaches the
	// client (OpenSSH's MIN_READ_SIZE), and the smallest read or write
	// size the server's limits do: a server that said 1 byte had a
	// request sent per byte of a file.
	MinReadSize = 512

	// requestsScale bounds the requests in flight per file at this many
	// times maxConcurrentRequests, however small the requests: 8 keeps
	// the bytes in flight of 255 KiB requests with 32 KiB ones.
	requestsScale = 8
)

// sizes is what a Client learned of the server's request sizes.
type sizes struct {
	read  atomic.Int64 // data one read request asks for; shrinks on short answers
	write atomic.Int64 // data one write request carries

	// hostgate (change 27): the limits reply is taken by whichever
	// caller receives it from limitsCh, which then closes taken; the
	// others wait on taken, or give up on their ctx, which leaves the
	// reply in limitsCh for a later caller.
	limitsID uint32        // the limits request, when one was sent
	limitsCh chan result   // its reply; nil: none was asked
	taken    chan struct{} // closed once the reply was applied
}

type sshFxpLimitsPacket struct{ ID uint32 }

func (p *sshFxpLimitsPacket) id() uint32 { return p.ID }

func (p *sshFxpLimitsPacket) MarshalBinary() ([]byte, error) {
	b := make([]byte, 4, 4+1+4+4+len(extLimits))
	b = append(b, sshFxpExtended)
	b = marshalUint32(b, p.ID)
	return marshalString(b, extLimits), nil
}

// askLimits starts the client's sizes: maxPacket, and the server's limits
// when it offers them. Their request goes out now and is not waited for:
// the server answers it before any later request, so the first read or
// write that needs it (after an open) rarely waits.
func (c *Client) askLimits() {
	c.sizes.read.Store(int64(c.maxPacket))
	c.sizes.write.Store(int64(c.maxPacket))
	if _, ok := c.ext[extLimits]; !ok {
		return
	}
	c.sizes.limitsID = c.nextID()
	c.sizes.limitsCh = make(chan result, 1)
	c.sizes.taken = make(chan struct{})
	c.dispatchRequest(c.sizes.limitsCh, &sshFxpLimitsPacket{ID: c.sizes.limitsID})
}

// waitLimits waits until the limits reply, when one was asked for, has
// been applied, or until ctx ends, and then returns ctx's error
// (hostgate: change 27). A host that offers the extension and never
// answers it held every read and write of the client, whatever their
// ctx, until the connection ended. The first caller to receive the reply
// applies it; one that gave up leaves it to the next.
func (c *Client) waitLimits(ctx context.Context) error {
	if c.sizes.limitsCh == nil {
		return nil
	}
	select {
	case <-c.sizes.taken:
		return nil
	default:
	}
	select {
	case r := <-c.sizes.limitsCh:
		c.takeLimits(r)
		close(c.sizes.taken)
		return nil
	case <-c.sizes.taken:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// takeLimits applies the limits reply: uint64 packet, read and write
// lengths and open handles (OpenSSH's PROTOCOL); 0 is no limit, and one
// under MinReadSize is taken as MinReadSize. A failed request, or a reply
// that is not one, leaves maxPacket. A read size a short answer taught
// before the reply came (change 27: shortRead does not wait for it) is
// kept if smaller.
func (c *Client) takeLimits(r result) {
	r.flatten()
	defer r.release()
	if r.err != nil || r.typ != sshFxpExtendedReply {
		return
	}
	data, err := unmarshalSID(c.sizes.limitsID, r.data)
	if err != nil || len(data) < 24 {
		return
	}
	read := binary.BigEndian.Uint64(data[8:])
	write := binary.BigEndian.Uint64(data[16:])
	if read > 0 && read < uint64(c.maxPacket) {
		c.lowerReadSize(int64(max(read, min(MinReadSize, uint64(c.maxPacket)))))
	}
	if write > 0 && write < uint64(c.maxPacket) {
		c.sizes.write.Store(int64(max(write, min(MinReadSize, uint64(c.maxPacket)))))
	}
}

// lowerReadSize makes the read size n if that is smaller.
func (c *Client) lowerReadSize(n int64) {
	for {
		cur := c.sizes.read.Load()
		if n >= cur || c.sizes.read.CompareAndSwap(cur, n) {
			return
		}
	}
}

// ReadSize is the data one read request of c asks for: its packet size,
// or less where the server's limits or its answers said it reads less.
// It waits for the server's limits, when it offers them, for as long as
// the connection lasts, as the package's calls without a ctx wait for
// their replies; ReadSizeContext waits no longer than its ctx.
func (c *Client) ReadSize() int {
	_ = c.waitLimits(context.Background())
	return c.readSizeNow()
}

// ReadSizeContext is ReadSize, or ctx's error if ctx ends before the
// server's limits came (hostgate: change 27). A later call still gets
// them once they come.
func (c *Client) ReadSizeContext(ctx context.Context) (int, error) {
	if err := c.waitLimits(ctx); err != nil {
		return 0, err
	}
	return c.readSizeNow(), nil
}

// WriteSize is the data one write request of c carries: its packet size,
// or the server's largest write, if smaller. It waits for the server's
// limits as ReadSize does.
func (c *Client) WriteSize() int {
	_ = c.waitLimits(context.Background())
	return c.writeSizeNow()
}

// WriteSizeContext is WriteSize, or ctx's error if ctx ends before the
// server's limits came (hostgate: change 27).
func (c *Client) WriteSizeContext(ctx context.Context) (int, error) {
	if err := c.waitLimits(ctx); err != nil {
		return 0, err
	}
	return c.writeSizeNow(), nil
}

// readSizeNow and writeSizeNow are the sizes known now: callers have
// waited for the limits first (waitLimits, File.waitLimits), or, for
// the read size, take a smaller one the limits may still bring as it
// comes.
func (c *Client) readSizeNow() int  { return int(c.sizes.read.Load()) }
func (c *Client) writeSizeNow() int { return int(c.sizes.write.Load()) }

// waitLimits waits for the client's limits as f's requests wait for
// their replies: until they come or f is aborted, whose error it then
// returns (hostgate: change 27). A File's Read, Write and the others
// sized their requests before sending them, with ReadSize and
// WriteSize, and so waited past Abort.
func (f *File) waitLimits() error {
	if err := f.c.waitLimits(f.abortCtx); err != nil {
		return context.Cause(f.abortCtx)
	}
	return nil
}

// shortRead notes a read answered with n bytes inside a file: the
// server's largest read, which later reads ask for. It does not wait for
// the server's limits, which keep it if they come after and are larger
// (takeLimits).
func (c *Client) shortRead(n int) {
	c.lowerReadSize(int64(max(n, MinReadSize)))
}

// requestsFor is how many requests of size bytes keep as many bytes in
// flight as maxConcurrentRequests of maxPacket, at most requestsScale
// times as many.
func (c *Client) requestsFor(size int) int {
	n := (int64(c.maxConcurrentRequests)*int64(c.maxPacket) + int64(size) - 1) / int64(max(size, 1))
	return int(max(1, min(n, int64(c.maxConcurrentRequests)*requestsScale)))
}

// takeRead receives the reply to read request id on ch into b: its
// length, io.EOF at the end of the file, errEmptyRead for no bytes and no
// end.
func takeRead(id uint32, ch chan result, b []byte) (int, error) {
	s := <-ch
	if s.err != nil {
		return 0, s.err
	}
	s.flatten() // hostgate: copied out below
	defer s.release()
	switch s.typ {
	case sshFxpStatus:
		return 0, normaliseError(unmarshalStatus(id, s.data))
	case sshFxpData:
		data, err := unmarshalDataReply(id, s.data)
		if err != nil {
			return 0, err
		}
		if len(data) == 0 {
			// hostgate (change 7): no bytes and no end of file is
			// no progress; asking again would spin.
			return 0, errEmptyRead
		}
		return copy(b, data), nil
	default:
		return 0, unimplementedPacketErr(s.typ)
	}
}

// readRest fills b from off, the rest of a read answered short inside the
// file with answered bytes: in pieces of that size (at least a
// maxConcurrentRequests-th of b), all asked for at once, where change 7
// asked for the rest one request at a time. Once a piece brings bytes,
// answered is the client's read size.
//
// hostgate (change 11): tr, when not nil, counts the short answers.
func (f *File) readRest(b []byte, off int64, answered int, tr *ShortReads) (int, error) {
	if answered <= 0 {
		return f.readChunkAt(nil, b, off, tr)
	}
	piece := max(answered, MinReadSize, (len(b)+f.c.maxConcurrentRequests-1)/f.c.maxConcurrentRequests)
	type request struct {
		id uint32
		ch chan result
		b  []byte
	}
	reqs := make([]request, 0, (len(b)+piece-1)/piece)
	for o := 0; o < len(b); o += piece {
		r := request{id: f.c.nextID(), ch: make(chan result, 1), b: b[o:min(o+piece, len(b))]}
		f.c.dispatchFor(f, r.ch, &sshFxpReadPacket{
			ID:     r.id,
			Handle: f.handle,
			Offset: uint64(off) + uint64(o),
			Len:    uint32(len(r.b)),
		})
		reqs = append(reqs, r)
	}
	n := 0
	for i, r := range reqs {
		m, err := takeRead(r.id, r.ch, r.b)
		if i == 0 && m > 0 && tr.Inside(off) {
			f.c.shortRead(answered)
		}
		if err == nil && m < len(r.b) {
			if err = tr.Short(off+int64(n+m), len(r.b), m); err == nil {
				var more int
				more, err = f.readChunkAt(nil, r.b[m:], off+int64(n+m), tr)
				m += more
			}
		}
		n += m
		if err != nil {
			for _, r := range reqs[i+1:] {
				s := <-r.ch // answered or failed: give its page back
				s.release()
			}
			return n, err
		}
	}
	return n, nil
}

// hostgate: change 11 (HOSTGATE.md).

// maxTinyReads is how many reads inside one regular file a server may
// answer with fewer than MinReadSize bytes (and fewer than asked for).
const maxTinyReads = 64

// ErrTinyReads ends a download of a regular file whose server answered
// maxTinyReads reads inside it with fewer than MinReadSize bytes: a broken
// or hostile server, whose every byte took a round trip.
var ErrTinyReads = fmt.Errorf("sftp: the server answered %d reads inside a regular file with fewer than %d bytes each", maxTinyReads, MinReadSize)

// ShortReads counts the short answers of one download of a regular file.
// A server reads a regular file whole (pread returns less only at its
// end), and one that answers less sets its largest read, which OpenSSH's
// sftp-server never sets below MinReadSize. One that answered a byte a
// read had the client ask again for the rest for every byte, for ever in
// practice (a 64 MiB file at a round trip a byte); after maxTinyReads
// answers under MinReadSize the download fails with ErrTinyReads. The
// reads of a file of unknown kind (ReadAt, Read: a FIFO answers what was
// written) are not counted. Nor are answers that end at or past Size, the
// size the file's stat gave: a file that grew since, or one whose stat
// says nothing of its bytes (Linux's /proc files are regular, of size 0,
// and answer a page or a record a read); nor do they teach the client a
// read size. A nil *ShortReads counts nothing.
type ShortReads struct {
	Size int64 // the file's size as its stat gave it
	tiny atomic.Int32
}

// Inside says whether an answer ending at end is inside the file, as s
// knows it: short answers there are the server's. Any is, for a nil s.
func (s *ShortReads) Inside(end int64) bool { return s == nil || end < s.Size }

// Short notes a read that asked for asked bytes and was answered with n,
// fewer, ending at end; it returns ErrTinyReads once maxTinyReads such
// answers inside the file were under MinReadSize bytes.
func (s *ShortReads) Short(end int64, asked, n int) error {
	if s == nil || !s.Inside(end) || n >= min(asked, MinReadSize) {
		return nil
	}
	if s.tiny.Add(1) >= maxTinyReads {
		return ErrTinyReads
	}
	return nil
}

// LearnReadSize notes a read answered with n bytes inside a file, as the
// client's own reads do (change 8): the server's largest read, at least
// MinReadSize, which later reads ask for. It returns the read size.
//
// It does not wait for the server's limits (hostgate: change 27): a
// smaller read size they bring is taken when they come.
func (c *Client) LearnReadSize(n int) int {
	c.shortRead(n)
	return c.readSizeNow()
}

// RequestsFor is how many read requests of size bytes a download keeps in
// flight (change 8): as many bytes as MaxConcurrentRequestsPerFile
// requests of the packet size, at most requestsScale times as many
// requests.
func (c *Client) RequestsFor(size int) int { return c.requestsFor(size) }
