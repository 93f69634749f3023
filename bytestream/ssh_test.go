package bytestream

import (
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// sshOver runs an SSH client on c1 and a server on c2 (no auth), opens one
// channel, and returns the client side of it and a func reporting what the
// server side read.
func sshOver(t *testing.T, c1, c2 net.Conn) (ssh.Channel, func() int64) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	scfg := &ssh.ServerConfig{NoClientAuth: true}
	scfg.AddHostKey(signer)
	var (
		wg   sync.WaitGroup
		read int64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc, chans, reqs, err := ssh.NewServerConn(c2, scfg)
		if err != nil {
			t.Errorf("server: %v", err)
			return
		}
		defer sc.Close()
		go ssh.DiscardRequests(reqs)
		nc, ok := <-chans
		if !ok {
			return
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			return
		}
		go ssh.DiscardRequests(creqs)
		read, _ = io.Copy(io.Discard, ch)
		ch.Close()
	}()
	cc, chans, reqs, err := ssh.NewClientConn(c1, "x", &ssh.ClientConfig{User: "u", HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	client := ssh.NewClient(cc, chans, reqs)
	t.Cleanup(func() { client.Close(); wg.Wait() })
	ch, creqs, err := client.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	go ssh.DiscardRequests(creqs)
	return ch, func() int64 { wg.Wait(); return read }
}

// SSH bulk data over yamux over a WebSocket must travel in large messages,
// not a stream of tiny ones: count the writes reaching the WebSocket.
func TestSSHOverMuxMessageSizes(t *testing.T) {
	a, b := wsPair(t)
	cc := &countingConn{Conn: a}
	cli, srv := muxPair(t, cc, b, &MuxConfig{KeepAliveInterval: -1}, nil)
	acc := make(chan net.Conn, 1)
	go func() { s, _ := srv.Accept(); acc <- s }()
	s1, err := cli.Open()
	if err != nil {
		t.Fatal(err)
	}
	s2 := <-acc
	if s2 == nil {
		t.Fatal("accept failed")
	}
	ch, served := sshOver(t, s1, s2)
	const size = 4 << 20
	// 32 KiB writes, as bicopy makes them.
	data := randomData(7, size)
	for off := 0; off < size; off += 32 << 10 {
		if _, err := ch.Write(data[off : off+32<<10]); err != nil {
			t.Fatal(err)
		}
	}
	ch.CloseWrite()
	if got := served(); got != size {
		t.Fatalf("server read %d bytes, want %d", got, size)
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	var total, small int
	for _, w := range cc.writes {
		total += len(w)
		if len(w) < 1024 {
			small++
		}
	}
	n := len(cc.writes)
	hist := map[int]int{}
	for _, w := range cc.writes {
		hist[len(w)]++
	}
	t.Logf("sizes: %v", hist)
	t.Logf("%d messages, %d under 1 KiB, mean %d bytes", n, small, total/n)
	// x/crypto/ssh writes each 32 KiB packet as two writes (4 KiB through
	// its bufio.Writer, then the rest); each becomes one yamux frame and
	// one message. Messages under 1 KiB are handshake and window adjusts.
	if total/n < 8<<10 || small > n/10 {
		t.Fatalf("%d messages, %d under 1 KiB, mean %d bytes: bulk data is fragmented", n, small, total/n)
	}
}
