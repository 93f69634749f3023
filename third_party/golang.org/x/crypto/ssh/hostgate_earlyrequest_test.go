// Copyright 2026 The hostgate Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package ssh

import (
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// hostgate: tests of early requests (earlyrequest.go, HOSTGATE.md change
// 26).

// earlyReqPair is a client and a server over loopback TCP, the client's
// writes counted, every packet nothing waits for held (holdDelay an hour,
// so that the count is exact); handle takes each channel the client
// opens, and sc is the server's connection.
type earlyReqPair struct {
	cli  *Client
	cliW *writeCounter
	sc   chan *ServerConn
	done chan error // the server's connection's end
}

func newEarlyReqPair(t *testing.T, handle func(NewChannel)) *earlyReqPair {
	t.Helper()
	// First, so it runs last: nothing of the pair outlives the test.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	old := holdDelay
	holdDelay = time.Hour
	t.Cleanup(func() { holdDelay = old })
	a, b := testConnPair(t)
	p := &earlyReqPair{cliW: &writeCounter{Conn: b}, sc: make(chan *ServerConn, 1), done: make(chan error, 1)}
	go func() {
		sc, chans, reqs, err := NewServerConn(a, earlyServerConfig(t))
		if err != nil {
			p.done <- err
			return
		}
		p.sc <- sc
		go DiscardRequests(reqs)
		go func() {
			for nc := range chans {
				handle(nc)
			}
		}()
		p.done <- sc.Wait()
	}()
	c, chans, reqs, err := NewClientConn(p.cliW, "pipe", &ClientConfig{User: "u", HostKeyCallback: InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	p.cli = NewClient(c, chans, reqs)
	t.Cleanup(func() {
		_ = p.cli.Close()
		_ = a.Close()
		<-p.done
	})
	return p
}

// serveExec accepts a session and runs its one request: got receives
// each request's type, and an exec of "echo NAME" is then answered, once
// proceed gives a token (nil: at once), and writes NAME and a newline,
// exits 0 and closes.
func serveExec(got chan<- string, proceed <-chan struct{}) func(NewChannel) {
	return func(nc NewChannel) {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(UnknownChannelType, "session only")
			return
		}
		ch, reqs, err := nc.Accept()
		if err != nil {
			return
		}
		go func() {
			defer ch.Close()
			for r := range reqs {
				got <- r.Type
				var cmd execMsg
				if r.Type != "exec" || Unmarshal(r.Payload, &cmd) != nil || len(cmd.Command) < 5 {
					_ = r.Reply(false, nil)
					continue
				}
				if proceed != nil {
					if _, ok := <-proceed; !ok {
						return
					}
				}
				_ = r.Reply(true, nil)
				_, _ = io.WriteString(ch, cmd.Command[5:]+"\n")
				_, _ = ch.SendRequest("exit-status", false, []byte{0, 0, 0, 0})
				return
			}
		}()
	}
}

// TestHostgateEarlyRequest: a session opened early sends its open and its
// exec in one write, before any answer; the command runs and its output
// and exit come back. A second session, opened once the first has its
// answer, does the same.
//
// The writes are counted when the server has the exec and has not
// answered it, not once Start returns: Start returns on the exec's reply
// and then starts the session's stdin copy, which, with Stdin nil, sends
// the EOF at once, in a write of its own (the channel is established by
// then). Under load that goroutine ran before a count after Start, which
// found two writes.
func TestHostgateEarlyRequest(t *testing.T) {
	got := make(chan string, 4)
	proceed := make(chan struct{})
	p := newEarlyReqPair(t, serveExec(got, proceed))
	// Before the pair's cleanup: a server still holding its answer ends.
	t.Cleanup(func() { close(proceed) })
	for _, name := range []string{"first", "second"} {
		before := p.cliW.n.Load()
		s, err := p.cli.NewSessionEarly()
		if err != nil {
			t.Fatal(err)
		}
		if n := p.cliW.n.Load() - before; n != 0 {
			t.Fatalf("%s: %d writes for the open alone; want it held for the request", name, n)
		}
		out, err := s.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		started := make(chan error, 1)
		go func() { started <- s.Start("echo " + name) }()
		// The server has the exec and holds its answer until proceed.
		if typ := <-got; typ != "exec" {
			t.Fatalf("%s: the server got %q first", name, typ)
		}
		if n := p.cliW.n.Load() - before; n != 1 {
			t.Fatalf("%s: %d writes for the open and its exec; want one", name, n)
		}
		proceed <- struct{}{} // the exec's reply, the output and exit may come
		if err := <-started; err != nil {
			t.Fatalf("%s: Start: %v", name, err)
		}
		b, err := io.ReadAll(out)
		if err != nil || string(b) != name+"\n" {
			t.Fatalf("%s: output %q, %v", name, b, err)
		}
		if err := s.Wait(); err != nil {
			t.Fatalf("%s: Wait: %v", name, err)
		}
	}
}

// TestHostgateEarlyRequestRefused: the refusal of an early session's open
// is the error of its request, an *OpenChannelError.
func TestHostgateEarlyRequestRefused(t *testing.T) {
	p := newEarlyReqPair(t, func(nc NewChannel) { _ = nc.Reject(ResourceShortage, "too many sessions") })
	s, err := p.cli.NewSessionEarly()
	if err != nil {
		t.Fatal(err)
	}
	err = s.Start("true")
	var oce *OpenChannelError
	if !errors.As(err, &oce) || oce.Reason != ResourceShortage {
		t.Fatalf("Start on a refused early session: %v, want the open's refusal", err)
	}
	// The connection lives on.
	if _, _, err := p.cli.SendRequest("keepalive@hostgate.test", true, nil); err != nil {
		t.Fatalf("the connection after a refused early session: %v", err)
	}
}

// TestHostgateEarlyRequestsBounded: a channel not answered yet takes at
// most maxEarlyRequests early requests; one more ends the connection with
// an error, not a blocked mux (its queue holds chanSize).
func TestHostgateEarlyRequestsBounded(t *testing.T) {
	p := newEarlyReqPair(t, func(NewChannel) {}) // never answered
	s, err := p.cli.NewSessionEarly()
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxEarlyRequests + 1 {
		if _, err := s.ch.SendRequest("env", false, Marshal(setenvRequest{Name: "V", Value: "x"})); err != nil && i < maxEarlyRequests {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	select {
	case err := <-p.done:
		if err == nil || err == io.EOF {
			t.Fatalf("server's end: %v, want the bound's error", err)
		}
		p.done <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("the server took more early requests than its bound")
	}
}

// TestHostgateEarlyRequestUnknownChannel: an early request for an id no
// channel of the peer's holds is dropped, as early data for one is.
func TestHostgateEarlyRequestUnknownChannel(t *testing.T) {
	m := &mux{}
	p := Marshal(channelRequestMsg{PeersID: 42, Request: "exec", WantReply: true})
	p[0] = msgChannelEarlyRequest
	if err := m.handleEarlyRequest(p); err != nil {
		t.Fatalf("early request for no channel: %v, want it dropped", err)
	}
}

// FuzzHostgateEarlyRequest feeds an inbound channel early request packets
// (b split by 2-byte lengths; each addressed to the channel unless its
// first byte is odd): every packet taken is queued on the channel as the
// request it holds, in order; at most maxEarlyRequests are; packets for
// other ids are dropped; a malformed packet or one too many is an error.
func FuzzHostgateEarlyRequest(f *testing.F) {
	frame := func(ps ...[]byte) []byte {
		var out []byte
		for _, p := range ps {
			out = append(out, byte(len(p)>>8), byte(len(p)))
			out = append(out, p...)
		}
		return out
	}
	req := func(typ string, reply bool, data string) []byte {
		return Marshal(channelRequestMsg{PeersID: 7, Request: typ, WantReply: reply, RequestSpecificData: []byte(data)})
	}
	f.Add(frame(req("exec", true, "\x00\x00\x00\x04true")))
	f.Add(frame(req("pty-req", true, "xterm"), req("env", false, "A=b"), req("shell", true, "")))
	f.Add(frame(req("env", false, ""), req("env", false, ""), req("env", false, ""), req("env", false, ""),
		req("env", false, ""), req("env", false, ""), req("env", false, ""), req("env", false, ""), req("env", false, "")))
	f.Add(frame([]byte{201, 0, 0, 0, 7, 0, 0, 0, 9, 'x'})) // type's length beyond the packet
	f.Add(frame([]byte{201, 0, 0, 0}))
	f.Fuzz(func(t *testing.T, b []byte) {
		const id = 7
		m := &mux{}
		ch := m.newChannel("session", channelInbound, nil, false)
		ch.remoteId = id
		m.chanList.addRemote(ch)
		var want []channelRequestMsg
		for len(b) >= 2 {
			n := min(int(b[0])<<8|int(b[1]), len(b)-2)
			p := append([]byte{msgChannelEarlyRequest}, b[2:2+n]...)
			b = b[2+n:]
			if len(p) >= 5 {
				addr := uint32(id)
				if p[1]&1 == 1 {
					addr = 1000
				}
				binary.BigEndian.PutUint32(p[1:], addr)
			}
			var msg channelRequestMsg
			parsed := append([]byte{msgChannelRequest}, p[1:]...)
			perr := Unmarshal(parsed, &msg)
			err := m.handleEarlyRequest(p)
			if err != nil {
				if err.Error() == "" {
					t.Fatal("refusal without a message")
				}
				if perr == nil && len(want) < maxEarlyRequests && binary.BigEndian.Uint32(p[1:]) == id {
					t.Fatalf("refused a well-formed request, the %dth: %v", len(want)+1, err)
				}
				break // the connection ends
			}
			if len(p) < 5 || binary.BigEndian.Uint32(p[1:]) != id {
				continue
			}
			if perr != nil {
				t.Fatalf("took a packet that does not parse: %v", perr)
			}
			want = append(want, msg)
		}
		if len(want) > maxEarlyRequests {
			t.Fatalf("took %d early requests, bound %d", len(want), maxEarlyRequests)
		}
		for i, w := range want {
			select {
			case r := <-ch.incomingRequests:
				if r.Type != w.Request || r.WantReply != w.WantReply || string(r.Payload) != string(w.RequestSpecificData) || r.ch != ch {
					t.Fatalf("request %d queued as %+v, sent as %+v", i, r, w)
				}
			default:
				t.Fatalf("%d requests taken, %d queued", len(want), i)
			}
		}
		select {
		case r := <-ch.incomingRequests:
			t.Fatalf("queued a request nobody sent: %+v", r)
		default:
		}
	})
}

// TestHostgateEarlySessionWindow: a session opened early with a window of
// its own (NewSessionEarlyWindow, a terminal's) grants the peer that
// much, as NewSessionWindow does, and its requests go early.
func TestHostgateEarlySessionWindow(t *testing.T) {
	const window = 64 << 10
	local, peer := packetPipe()
	m := newMux(local)
	defer m.Close()
	ch, err := m.openChannelEarlyWindow("session", nil, window)
	if err != nil {
		t.Fatal(err)
	}
	ch.earlyRequests = true
	p, err := peer.readPacket()
	if err != nil {
		t.Fatal(err)
	}
	var open channelOpenMsg
	if err := Unmarshal(p, &open); err != nil {
		t.Fatal(err)
	}
	if open.ChanType != "session" || open.PeersWindow != window {
		t.Fatalf("opened %q granting %d bytes, want a session granting %d", open.ChanType, open.PeersWindow, window)
	}
	if _, err := ch.SendRequest("pty-req", false, nil); err != nil {
		t.Fatal(err)
	}
	if p, err = peer.readPacket(); err != nil || p[0] != msgChannelEarlyRequest || binary.BigEndian.Uint32(p[1:]) != open.PeersID {
		t.Fatalf("after the open the peer got %v (%v), want an early request under the opener's id %d", p, err, open.PeersID)
	}
}
