package ssh

import (
	"bytes"
	"io"
	"sync"
	"testing"
	"time"
)

// pipePackets is one side of an in-memory packetConn pair.
type pipePackets struct {
	in     <-chan []byte
	out    chan<- []byte
	closed chan struct{}
	once   *sync.Once
}

func packetPipe() (a, b *pipePackets) {
	ab, ba := make(chan []byte, 64), make(chan []byte, 64)
	closed, once := make(chan struct{}), new(sync.Once)
	return &pipePackets{in: ba, out: ab, closed: closed, once: once},
		&pipePackets{in: ab, out: ba, closed: closed, once: once}
}

func (p *pipePackets) writePacket(b []byte) error {
	select {
	case p.out <- append([]byte(nil), b...):
		return nil
	case <-p.closed:
		return io.EOF
	}
}

func (p *pipePackets) readPacket() ([]byte, error) {
	select {
	case b := <-p.in:
		return b, nil
	case <-p.closed:
		return nil, io.EOF
	}
}

func (p *pipePackets) Close() error { p.once.Do(func() { close(p.closed) }); return nil }

// TestHostgateCloseDropsData: once this side has closed a channel (sent
// its CLOSE), what the peer sent and nobody read is dropped, a Read
// blocked on the channel returns, and what the peer sends until its own
// CLOSE is discarded, not buffered. A peer that never answers the CLOSE (a
// hostile agent, to the gateway's shared preview connection) made every
// closed channel keep up to its window (1 MiB) of data, and a goroutine
// blocked reading it, for the life of the connection.
func TestHostgateCloseDropsData(t *testing.T) {
	local, peer := packetPipe()
	m := newMux(local)
	defer m.Close()

	opened := make(chan *channel, 1)
	go func() {
		ch, err := m.openChannel("direct-tcpip", nil)
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
	const peerID = 7
	if err := peer.writePacket(Marshal(channelOpenConfirmMsg{
		PeersID: open.PeersID, MyID: peerID, MyWindow: 1 << 20, MaxPacketSize: channelMaxPacket,
	})); err != nil {
		t.Fatal(err)
	}
	ch := <-opened
	if ch == nil {
		t.FailNow()
	}
	data := func(n int) []byte {
		return Marshal(channelDataMsg{PeersID: open.PeersID, Length: uint32(n), Rest: bytes.Repeat([]byte{'x'}, n)})
	}
	for range 4 {
		if err := peer.writePacket(data(channelMaxPacket)); err != nil {
			t.Fatal(err)
		}
	}
	// The program reads one packet's worth, then blocks on the rest...
	got := make([]byte, channelMaxPacket)
	if _, err := io.ReadFull(ch, got); err != nil {
		t.Fatal(err)
	}
	for i := 0; ch.pending.empty() && i < 1000; i++ {
		time.Sleep(time.Millisecond)
	}
	read := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(ch)
		read <- err
	}()
	// ...and closes the channel.
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	p, err = peer.readPacket()
	if err != nil || p[0] != msgChannelClose {
		t.Fatalf("peer got %v, %v; want the CLOSE", p, err)
	}
	select {
	case err := <-read:
		if err != nil {
			t.Fatalf("read blocked on the channel ended with %v, want EOF", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read blocked on the channel did not end when it was closed")
	}
	// The peer goes on sending, within its window, and never closes.
	for range 8 {
		if err := peer.writePacket(data(channelMaxPacket)); err != nil {
			t.Fatal(err)
		}
	}
	// A packet for another channel, round trip: the mux has handled
	// everything before it once this request is answered.
	if err := peer.writePacket(Marshal(channelRequestMsg{PeersID: 1 << 30, Request: "x", WantReply: true})); err != nil {
		t.Fatal(err)
	}
	if p, err := peer.readPacket(); err != nil || p[0] != msgChannelFailure {
		t.Fatalf("peer got %v, %v; want a channel failure", p, err)
	}
	if !ch.pending.empty() {
		t.Fatal("a channel closed here buffers what its peer sends")
	}
	m.errCond.L.Lock()
	merr := m.err
	m.errCond.L.Unlock()
	if merr != nil {
		t.Fatalf("connection failed: %v", merr)
	}
}

// TestHostgateCloseDropsDataEarly: the same for an early channel closed
// before its open was answered (a preview whose viewer left first): the
// peer that then confirms it, sends data and never closes leaves nothing
// buffered.
func TestHostgateCloseDropsDataEarly(t *testing.T) {
	local, peer := packetPipe()
	m := newMux(local)
	defer m.Close()

	ch, err := m.openChannelEarly("direct-tcpip", nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := peer.readPacket()
	if err != nil {
		t.Fatal(err)
	}
	var open channelOpenMsg
	if err := Unmarshal(p, &open); err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if err := peer.writePacket(Marshal(channelOpenConfirmMsg{
		PeersID: open.PeersID, MyID: 7, MyWindow: 1 << 20, MaxPacketSize: channelMaxPacket,
	})); err != nil {
		t.Fatal(err)
	}
	if p, err := peer.readPacket(); err != nil || p[0] != msgChannelClose {
		t.Fatalf("peer got %v, %v; want the CLOSE sent with the answer", p, err)
	}
	for range 8 {
		if err := peer.writePacket(Marshal(channelDataMsg{PeersID: open.PeersID, Length: channelMaxPacket, Rest: bytes.Repeat([]byte{'x'}, channelMaxPacket)})); err != nil {
			t.Fatal(err)
		}
	}
	if err := peer.writePacket(Marshal(channelRequestMsg{PeersID: 1 << 30, Request: "x", WantReply: true})); err != nil {
		t.Fatal(err)
	}
	if p, err := peer.readPacket(); err != nil || p[0] != msgChannelFailure {
		t.Fatalf("peer got %v, %v; want a channel failure", p, err)
	}
	if !ch.pending.empty() {
		t.Fatal("an early channel closed before its answer buffers what its peer sends")
	}
}

// TestHostgateCloseEndsBlockedWrite: a Write waiting for window when this
// side closes the channel returns then, with what it sent. It waited for
// the peer's CLOSE, and a peer that never answers one (nor grants window)
// kept the writing goroutine for the connection's life.
func TestHostgateCloseEndsBlockedWrite(t *testing.T) {
	local, peer := packetPipe()
	m := newMux(local)
	defer m.Close()

	opened := make(chan *channel, 1)
	go func() {
		ch, err := m.openChannel("direct-tcpip", nil)
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
	const window = 1024
	if err := peer.writePacket(Marshal(channelOpenConfirmMsg{
		PeersID: open.PeersID, MyID: 7, MyWindow: window, MaxPacketSize: channelMaxPacket,
	})); err != nil {
		t.Fatal(err)
	}
	ch := <-opened
	if ch == nil {
		t.FailNow()
	}
	type result struct {
		n   int
		err error
	}
	wrote := make(chan result, 1)
	go func() {
		n, err := ch.Write(make([]byte, 4*window))
		wrote <- result{n, err}
	}()
	// The window's worth arrives; the Write waits for more.
	if p, err := peer.readPacket(); err != nil || p[0] != msgChannelData {
		t.Fatalf("peer got %v, %v; want data", p, err)
	}
	for i := 0; i < 1000; i++ {
		ch.remoteWin.L.Lock()
		waiting := ch.remoteWin.writeWaiters > 0
		ch.remoteWin.L.Unlock()
		if waiting {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-wrote:
		if r.n != window || r.err == nil {
			t.Fatalf("Write after Close: %d, %v; want %d and an error", r.n, r.err, window)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a Write waiting for window did not end when the channel was closed")
	}
}
