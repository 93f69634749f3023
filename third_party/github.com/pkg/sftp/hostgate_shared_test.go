package sftp

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// packetReader hands a byte stream out in packets of random size, as
// hostgate's SSH channel does (x/crypto fork, change 15): Read copies,
// ReadShared returns a packet's bytes where they lie, one packet per
// call. A packet is "given back" once the reader has moved past it and
// every part handed out has been released; it is then overwritten, so
// that a reply used after its release shows.
type packetReader struct {
	t   testing.TB
	r   io.Reader
	rng *rand.Rand

	mu     sync.Mutex // held across a read of r
	cur    *countedPacket
	rest   []byte
	shared atomic.Int64 // parts handed out

	pmu     sync.Mutex
	packets []*countedPacket
}

type countedPacket struct {
	buf     []byte
	holders atomic.Int32
}

func (p *countedPacket) drop() {
	if n := p.holders.Add(-1); n == 0 {
		for i := range p.buf {
			p.buf[i] = 0xee
		}
	} else if n < 0 {
		panic("packet given back twice")
	}
}

type part struct {
	p    *countedPacket
	done atomic.Bool
	t    testing.TB
}

func (r *part) Release() {
	if r.done.Swap(true) {
		r.t.Error("a part released twice")
		return
	}
	r.p.drop()
}

func newPacketReader(t testing.TB, r io.Reader, seed uint64) *packetReader {
	return &packetReader{t: t, r: r, rng: rand.New(rand.NewPCG(seed, 1))}
}

// fill makes sure a packet with bytes left is current. Called with mu held.
func (c *packetReader) fill() error {
	if len(c.rest) > 0 {
		return nil
	}
	buf := make([]byte, 1+c.rng.IntN(40<<10))
	n, err := c.r.Read(buf)
	if n == 0 {
		if err == nil {
			err = io.ErrNoProgress
		}
		return err
	}
	c.cur = &countedPacket{buf: buf[:n]}
	c.cur.holders.Store(1)
	c.pmu.Lock()
	c.packets = append(c.packets, c.cur)
	c.pmu.Unlock()
	c.rest = c.cur.buf
	return nil
}

// advance moves n bytes on, giving the reader's hold on the packet back
// when it is drained. Called with mu held.
func (c *packetReader) advance(n int) {
	c.rest = c.rest[n:]
	if len(c.rest) == 0 {
		c.cur.drop()
	}
}

func (c *packetReader) Read(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fill(); err != nil {
		return 0, err
	}
	n := copy(b, c.rest)
	c.advance(n)
	return n, nil
}

func (c *packetReader) ReadShared(max int) ([]byte, interface{ Release() }, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fill(); err != nil {
		return nil, nil, err
	}
	n := min(max, len(c.rest))
	p := c.rest[:n:n]
	c.cur.holders.Add(1)
	c.advance(n)
	c.shared.Add(1)
	return p, &part{p: c.cur, t: c.t}, nil
}

// held counts the packets not given back.
func (c *packetReader) held() int {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	n := 0
	for _, p := range c.packets {
		if p.holders.Load() != 0 {
			n++
		}
	}
	return n
}

// sharedPipe is a client and a server over pipes, the client's reads
// through a packetReader.
func sharedPipe(t *testing.T, seed uint64, opts ...ClientOption) (*Client, *packetReader) {
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	srv, err := NewServer(struct {
		io.Reader
		io.WriteCloser
	}{sr, sw}, WithMaxTxPacket(255<<10))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve()
		_ = sw.Close() // ends the client's receive loop
	}()
	pr := newPacketReader(t, cr, seed)
	c, err := NewClientPipe(pr, cw, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		<-served
		if n := pr.held(); n != 0 {
			t.Errorf("%d packets not given back once the client closed", n)
		}
	})
	return c, pr
}

// hostgate: change 6 (HOSTGATE.md). A download through File.WriteTo
// writes the data replies from the channel's packets (replies cut across
// packets, packets holding the end of one reply and the start of the
// next), every byte once and in order; ReadAt, Read and ReadAtNoWait, which
// copy, see the same bytes; every packet goes back once, after its last
// byte was written or copied (a packet given back early is overwritten:
// the bytes would differ).
func TestHostgateWriteToShared(t *testing.T) {
	data := make([]byte, 3<<20+12345)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts []ClientOption
	}{
		{"32KiB", nil},
		{"255KiB", []ClientOption{MaxPacketUnchecked(255 << 10), MaxConcurrentRequestsPerFile(32)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, pr := sharedPipe(t, 9, tc.opts...)
			f, err := c.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var got bytes.Buffer
			if n, err := f.WriteTo(&got); err != nil || n != int64(len(data)) {
				t.Fatalf("WriteTo: %d, %v; want %d", n, err, len(data))
			}
			if !bytes.Equal(got.Bytes(), data) {
				t.Fatal("WriteTo wrote other bytes than the file's")
			}
			if pr.shared.Load() == 0 {
				t.Fatal("WriteTo took no data by reference")
			}
			b := make([]byte, len(data))
			if n, err := f.ReadAt(b, 0); n != len(data) || (err != nil && err != io.EOF) || !bytes.Equal(b, data) {
				t.Fatalf("ReadAt: %d, %v, same bytes %v", n, err, bytes.Equal(b, data))
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			got.Reset()
			for {
				n, err := f.Read(b[:64<<10])
				got.Write(b[:n])
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got.Bytes(), data) {
				t.Fatal("Read read other bytes than the file's")
			}
			nb := make([]byte, 40<<10)
			if n, err := f.ReadAtNoWait(nb, 1000).Wait(); err != nil || !bytes.Equal(nb[:n], data[1000:1000+n]) || n < 32<<10 {
				t.Fatalf("ReadAtNoWait: %d, %v", n, err)
			}
		})
	}
}

// hostgate: change 6. A WriteTo that ends early (its writer fails in the
// middle) gives back every packet it held or was still to receive.
func TestHostgateWriteToSharedEarlyEnd(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16)
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, data, 0o600); err != nil {
		t.Fatal(err)
	}
	c, pr := sharedPipe(t, 11, MaxPacketUnchecked(255<<10), MaxConcurrentRequestsPerFile(32))
	f, err := c.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	errFull := errors.New("full")
	var written int
	w := writeFunc(func(p []byte) (int, error) {
		if written+len(p) > 1<<20 {
			return 0, errFull
		}
		if !bytes.Equal(p, data[written:written+len(p)]) {
			t.Error("wrong bytes written")
		}
		written += len(p)
		return len(p), nil
	})
	if n, err := f.WriteTo(w); !errors.Is(err, errFull) || n != int64(written) {
		t.Fatalf("WriteTo: %d, %v; want %d, the writer's error", n, err, written)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if pr.shared.Load() == 0 {
		t.Fatal("WriteTo took no data by reference")
	}
	// Every reply was received before WriteTo returned, and the packets of
	// those nobody wrote given back; the reader holds only its current
	// packet, if any.
	if n := pr.held(); n > 1 {
		t.Fatalf("%d packets not given back after WriteTo ended early", n)
	}
}

// reply is an SFTP reply: its length, type, id and body.
func reply(typ byte, id uint32, body []byte) []byte {
	b := marshalUint32(nil, uint32(1+4+len(body)))
	b = append(b, typ)
	b = marshalUint32(b, id)
	return append(b, body...)
}

func dataReply(id uint32, declared int, data []byte) []byte {
	return reply(sshFxpData, id, append(marshalUint32(nil, uint32(declared)), data...))
}

// hostgate: change 6. The client's receive of replies from a channel that
// shares its packets: a data reply of pagedMin bytes or more comes as
// references, anything else (small replies, a large reply of another
// type) as before; malformed or cut short, a clear error and every part
// given back.
func TestHostgateRecvShared(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 100<<10)
	name := bytes.Repeat([]byte("n"), 40<<10)
	var stream []byte
	stream = append(stream, dataReply(1, len(big), big)...)
	stream = append(stream, dataReply(2, 10, big[:10])...)
	stream = append(stream, reply(sshFxpName, 3, name)...)
	stream = append(stream, dataReply(4, len(big)+1, big)...) // claims one byte more than it carries
	stream = append(stream, dataReply(5, 5, big)...)          // carries more than it claims
	stream = append(stream, dataReply(8, len(big), big)...)   // more than was asked for
	stream = append(stream, dataReply(6, len(big), big)...)   // answers another request
	cut := dataReply(7, len(big), big)
	stream = append(stream, cut[:len(cut)-100]...) // the connection ends in it

	pr := newPacketReader(t, bytes.NewReader(stream), 3)
	recv := func() result {
		t.Helper()
		var rb recvBufs
		typ, data, err := recvPacket(pr, nil, 0, &rb)
		return result{typ: typ, data: data, err: err, page: rb.page, refs: rb.refs}
	}
	var w bytes.Buffer
	write := func(r result, id uint32, max int) (int64, error) {
		t.Helper()
		defer r.release()
		if r.refs == nil {
			t.Fatalf("reply %d: data not shared", id)
		}
		if _, err := r.sharedData(id, max); err != nil {
			return 0, err
		}
		w.Reset()
		return r.refs.writeTo(&w)
	}

	if n, err := write(recv(), 1, len(big)); err != nil || n != int64(len(big)) || !bytes.Equal(w.Bytes(), big) {
		t.Fatalf("reply 1: %d, %v", n, err)
	}
	r := recv()
	if r.refs != nil || r.page != nil {
		t.Fatal("a small reply shared or paged")
	}
	if d, err := unmarshalDataReply(2, r.data); err != nil || !bytes.Equal(d, big[:10]) {
		t.Fatalf("reply 2: %q, %v", d, err)
	}
	r = recv()
	if r.typ != sshFxpName || r.refs != nil || r.page == nil || !bytes.Equal(r.data[4:], name) {
		t.Fatalf("a large name reply: type %v, shared %v, paged %v", r.typ, r.refs != nil, r.page != nil)
	}
	r.release()
	if _, err := write(recv(), 4, len(big)+1); err != errShortPacket {
		t.Fatalf("a reply claiming more data than it carries: %v, want errShortPacket", err)
	}
	if n, err := write(recv(), 5, 1<<20); err != nil || n != 5 {
		t.Fatalf("a reply carrying more than it claims: %d, %v; want its 5 bytes", n, err)
	}
	if n, err := write(recv(), 8, 1000); err != nil || n != 1000 || !bytes.Equal(w.Bytes(), big[:1000]) {
		t.Fatalf("a reply longer than asked for: %d, %v; want the 1000 bytes asked for", n, err)
	}
	var idErr *unexpectedIDErr
	if _, err := write(recv(), 99, len(big)); !errors.As(err, &idErr) {
		t.Fatalf("a reply to another request: %v, want an unexpected id", err)
	}
	// The stream ends inside reply 7.
	r = recv()
	if r.err == nil || !errors.Is(r.err, io.ErrUnexpectedEOF) || !strings.Contains(r.err.Error(), "error reading packet body") || r.refs != nil {
		t.Fatalf("a reply cut short: %v (shared %v), want an unexpected EOF reading its body", r.err, r.refs != nil)
	}
	if n := pr.held(); n != 0 {
		t.Fatalf("%d packets held after the replies were released", n)
	}
}
