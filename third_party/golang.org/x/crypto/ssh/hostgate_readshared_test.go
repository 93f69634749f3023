package ssh

import (
	"bytes"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
)

// pooledData returns channel data of n bytes in a recycled packet, as the
// transport hands it to a channel: the data, and the packet it is part
// of (behind a 9-byte data message header).
func pooledData(n int, fill byte) (data, packet []byte) {
	packet = getPacketArray()[1 : 1+9+n]
	data = packet[9:]
	for i := range data {
		data[i] = fill + byte(i)
	}
	return data, packet
}

func mustShared(t *testing.T, r interface{ Release() }) *sharedPacket {
	t.Helper()
	s, ok := r.(*sharedPacket)
	if !ok {
		t.Fatalf("release %T, want a *sharedPacket", r)
	}
	return s
}

// TestHostgateReadShared: readShared hands out a packet's bytes where they
// lie, one packet per call, in order with Read's; the packet goes back to
// the pool only when the buffer has moved past it and every part handed
// out has been released, once; a second release of the last part panics.
func TestHostgateReadShared(t *testing.T) {
	b := newBuffer()
	d1, p1 := pooledData(100, 0)
	d2, p2 := pooledData(50, 100)
	b.writePacket(d1, p1)
	b.writePacket(d2, p2)

	// A reply ends 30 bytes into the first packet, the next starts there.
	a, ra, err := b.readShared(30)
	if err != nil || len(a) != 30 || &a[0] != &d1[0] {
		t.Fatalf("readShared(30) = %d bytes at %p, %v; want the packet's first 30 bytes where they lie", len(a), a, err)
	}
	s := mustShared(t, ra)
	if got := s.refs.Load(); got != 2 {
		t.Fatalf("a packet part of which is out: %d holders, want 2 (the buffer and the caller)", got)
	}
	// One call stops at the end of the packet.
	c, rc, err := b.readShared(1000)
	if err != nil || len(c) != 70 || &c[0] != &d1[30] {
		t.Fatalf("readShared(1000) = %d bytes, %v; want the packet's other 70", len(c), err)
	}
	if mustShared(t, rc) != s {
		t.Fatal("two parts of one packet counted apart")
	}
	if got := s.refs.Load(); got != 2 || s.packet == nil {
		t.Fatalf("the buffer past the packet, two parts out: %d holders (packet kept %v), want 2", got, s.packet != nil)
	}
	if cap(a) != len(a) {
		t.Fatalf("a part has capacity %d past its %d bytes: an append would write over the next part", cap(a), len(a))
	}
	// Read copies from the next packet as before.
	buf := make([]byte, 10)
	if n, err := b.Read(buf); n != 10 || err != nil || !bytes.Equal(buf, d2[:10]) {
		t.Fatalf("Read after readShared: %d, %v", n, err)
	}
	e, re, err := b.readShared(1000)
	if err != nil || len(e) != 40 || &e[0] != &d2[10] {
		t.Fatalf("readShared after Read = %d bytes, %v; want the packet's last 40", len(e), err)
	}
	s2 := mustShared(t, re)
	if got := s2.refs.Load(); got != 1 {
		t.Fatalf("the packet's last part out, the buffer past it: %d holders, want 1", got)
	}

	ra.Release()
	if s.packet == nil || !bytes.Equal(c, d1[30:]) {
		t.Fatal("the packet went back while a part of it was still out")
	}
	rc.Release()
	if s.packet != nil || s.refs.Load() != 0 {
		t.Fatalf("every part released: packet kept %v, %d holders; want given back", s.packet != nil, s.refs.Load())
	}
	re.Release()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a part released twice did not panic")
			}
			s2.refs.Store(0)
		}()
		re.Release()
	}()

	// Data of a packet allocated for it alone comes by reference too,
	// with nothing to give back.
	plain := []byte("plain")
	b.write(plain)
	if p, r, err := b.readShared(100); err != nil || &p[0] != &plain[0] || len(p) != len(plain) {
		t.Fatalf("readShared of an allocated packet: %q, %v", p, err)
	} else {
		r.Release()
		r.Release() // nothing reuses it: any number is harmless
	}

	// Closed: parts still out keep their packet; the buffer's hold goes.
	d3, p3 := pooledData(64, 7)
	b.writePacket(d3, p3)
	f, rf, err := b.readShared(8)
	if err != nil || len(f) != 8 {
		t.Fatalf("readShared(8): %d, %v", len(f), err)
	}
	s3 := mustShared(t, rf)
	b.drop()
	if s3.refs.Load() != 1 || s3.packet == nil {
		t.Fatalf("dropped with a part out: %d holders, packet kept %v; want 1, kept", s3.refs.Load(), s3.packet != nil)
	}
	if _, _, err := b.readShared(8); err != io.EOF {
		t.Fatalf("readShared of a dropped buffer: %v, want io.EOF", err)
	}
	rf.Release()
	if s3.packet != nil {
		t.Fatal("the last part released after drop: packet not given back")
	}

	// io.EOF once drained, as Read.
	b = newBuffer()
	d4, p4 := pooledData(16, 1)
	b.writePacket(d4, p4)
	b.eof()
	if p, r, err := b.readShared(100); err != nil || len(p) != 16 {
		t.Fatalf("readShared before EOF: %d, %v", len(p), err)
	} else {
		r.Release()
	}
	if _, _, err := b.readShared(100); err != io.EOF {
		t.Fatalf("readShared after the last byte: %v, want io.EOF", err)
	}
}

// TestHostgateReadSharedConcurrent: packets written while a reader mixes
// readShared and Read of random sizes and releases its parts late, in any
// order: every byte comes out once, in order, unchanged while held (a
// packet given back early is reused by a later one and shows), and every
// packet is given back.
func TestHostgateReadSharedConcurrent(t *testing.T) {
	b := newBuffer()
	var want bytes.Buffer
	type part struct {
		p, want []byte
		r       interface{ Release() }
	}
	var got bytes.Buffer
	shared := map[*sharedPacket]bool{}
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		rr := rand.New(rand.NewPCG(5, 6))
		var held []part
		q := make([]byte, 50<<10)
		for {
			var err error
			if rr.IntN(4) == 0 {
				var n int
				n, err = b.Read(q[:1+rr.IntN(len(q)-1)])
				got.Write(q[:n])
			} else {
				var p []byte
				var r interface{ Release() }
				p, r, err = b.readShared(1 + rr.IntN(40<<10))
				if len(p) > 0 {
					got.Write(p)
					held = append(held, part{p, bytes.Clone(p), r})
					if s, ok := r.(*sharedPacket); ok {
						mu.Lock()
						shared[s] = true
						mu.Unlock()
					}
				}
			}
			for len(held) > 0 && (len(held) > 20 || err != nil || rr.IntN(3) == 0) {
				i := rr.IntN(len(held))
				h := held[i]
				if !bytes.Equal(h.p, h.want) {
					t.Error("a part changed while it was held")
				}
				h.r.Release()
				held = append(held[:i], held[i+1:]...)
			}
			if err == io.EOF {
				return
			}
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		n := rng.IntN(32 << 10)
		if n < minPooledPacket && i%2 == 0 {
			b.write(bytes.Repeat([]byte{byte(i)}, n))
			want.Write(bytes.Repeat([]byte{byte(i)}, n))
			continue
		}
		d, p := pooledData(n, byte(i))
		want.Write(d)
		b.writePacket(d, p)
	}
	b.eof()
	<-done
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("read %d bytes, want the %d written, in order", got.Len(), want.Len())
	}
	for s := range shared {
		if s.refs.Load() != 0 || s.packet != nil {
			t.Fatalf("a packet with %d holders left at the end, not given back", s.refs.Load())
		}
	}
	if len(shared) == 0 {
		t.Fatal("no packet was shared")
	}
}

// TestHostgateReadSharedWindow: bytes taken with ReadShared give the
// window back as Read's do: reading a full window through it returns the
// whole window, doubled, in at most a few adjusts.
func TestHostgateReadSharedWindow(t *testing.T) {
	local, peer := packetPipe()
	m := newMux(local)
	defer m.Close()

	opened := make(chan *channel, 1)
	go func() {
		ch, err := m.openChannel("session", nil)
		if err != nil {
			t.Error(err)
		}
		opened <- ch
	}()
	p, err := peer.readPacket()
	if err != nil {
		t.Fatal(err)
	}
	var open channelOpenMsg
	if err := Unmarshal(p, &open); err != nil {
		t.Fatal(err)
	}
	if err := peer.writePacket(Marshal(channelOpenConfirmMsg{
		PeersID: open.PeersID, MyID: 7, MyWindow: 1 << 20, MaxPacketSize: channelMaxPacket,
	})); err != nil {
		t.Fatal(err)
	}
	ch := <-opened
	if ch == nil {
		t.FailNow()
	}
	go func() {
		for range channelInitialWindow / channelMaxPacket {
			if err := peer.writePacket(Marshal(channelDataMsg{PeersID: open.PeersID, Length: channelMaxPacket, Rest: bytes.Repeat([]byte{'x'}, channelMaxPacket)})); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	// An adjust is sent within the ReadShared that calls for it: the
	// peer has it when the call returns.
	var adjusted uint32
	var adjusts int
	collect := func() {
		for {
			select {
			case p := <-peer.in:
				var adj windowAdjustMsg
				if err := Unmarshal(p, &adj); err != nil {
					t.Fatalf("peer got %v, want window adjusts only", p)
				}
				adjusts, adjusted = adjusts+1, adjusted+adj.AdditionalBytes
			default:
				return
			}
		}
	}
	for read := 0; read < channelInitialWindow; {
		p, r, err := ch.ReadShared(1000)
		if err != nil {
			t.Fatal(err)
		}
		read += len(p)
		r.Release()
		collect()
	}
	if adjusted != 2*channelInitialWindow || adjusts > 5 {
		t.Fatalf("reading the window through ReadShared: %d adjusts gave back %d bytes, want %d in at most 5", adjusts, adjusted, 2*channelInitialWindow)
	}
}
