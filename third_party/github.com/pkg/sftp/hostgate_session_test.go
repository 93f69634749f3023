package sftp

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// sessionServer is an SSH server on loopback whose session channels go to
// serve; it returns a client connected to it.
func sessionServer(t *testing.T, serve func(ch ssh.Channel, reqs <-chan *ssh.Request)) *ssh.Client {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		sc, chans, reqs, err := ssh.NewServerConn(conn, cfg)
		if err != nil {
			return
		}
		defer sc.Close()
		go ssh.DiscardRequests(reqs)
		for nc := range chans {
			ch, creqs, err := nc.Accept()
			if err != nil {
				return
			}
			go serve(ch, creqs)
		}
	}()
	c, err := ssh.Dial("tcp", ln.Addr().String(), &ssh.ClientConfig{User: "u", HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// prefixed reads head, then the channel.
type prefixed struct {
	io.Reader
	ssh.Channel
}

func (p prefixed) Read(b []byte) (int, error) { return p.Reader.Read(b) }

// NewClientSession sends the client's init behind the subsystem request,
// without waiting for its reply: this server answers the request only
// once the init has come, and refuses it after 10 s without.
func TestHostgateClientSessionPipelines(t *testing.T) {
	c := sessionServer(t, func(ch ssh.Channel, reqs <-chan *ssh.Request) {
		defer ch.Close()
		for req := range reqs {
			if req.Type != "subsystem" {
				_ = req.Reply(false, nil)
				continue
			}
			head := make(chan []byte, 1)
			go func() {
				b := make([]byte, 9) // the init: length, type, version
				if _, err := io.ReadFull(ch, b); err != nil {
					b = nil
				}
				head <- b
			}()
			var init []byte
			select {
			case init = <-head:
			case <-time.After(10 * time.Second):
			}
			if init == nil {
				_ = req.Reply(false, nil)
				return
			}
			_ = req.Reply(true, nil)
			go ssh.DiscardRequests(reqs)
			srv, err := NewServer(prefixed{io.MultiReader(bytes.NewReader(init), ch), ch})
			if err == nil {
				_ = srv.Serve()
			}
			return
		}
	})
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := NewClientSession(sess)
	if err != nil {
		t.Fatalf("NewClientSession: %v (the init waited for the request's reply)", err)
	}
	defer sc.Close()
	if _, err := sc.Stat("."); err != nil {
		t.Fatal(err)
	}
}

// A refused subsystem request is the call's error, returned without
// waiting for an init answer that never comes (the server keeps the
// channel open, as sshd does).
func TestHostgateClientSessionRefused(t *testing.T) {
	c := sessionServer(t, func(ch ssh.Channel, reqs <-chan *ssh.Request) {
		for req := range reqs {
			_ = req.Reply(false, nil)
		}
		_ = ch.Close()
	})
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewClientSession(sess); !errors.Is(err, errSubsystemRefused) {
		t.Fatalf("NewClientSession refused: %v, want %v", err, errSubsystemRefused)
	}
}

// Close of a client over a session whose host stopped reading and
// answering once it sent VERSION returns, and the calls in flight fail: a
// write of 32 MiB (past any window the host gives) and a Stat (change
// 32). Before, Close sent the session's EOF and waited for the host to
// end the session, which this one never does: for ever.
func TestHostgateClientSessionCloseSilentHost(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	c := sessionServer(t, func(ch ssh.Channel, reqs <-chan *ssh.Request) {
		defer ch.Close()
		for req := range reqs {
			if req.Type != "subsystem" {
				_ = req.Reply(false, nil)
				continue
			}
			_ = req.Reply(true, nil)
			go ssh.DiscardRequests(reqs)
			if _, err := io.ReadFull(ch, make([]byte, 9)); err != nil { // the init
				return
			}
			// VERSION 3, and then nothing read or answered.
			if _, err := ch.Write([]byte{0, 0, 0, 5, byte(sshFxpVersion), 0, 0, 0, 3}); err != nil {
				return
			}
			<-release
			return
		}
	})
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := NewClientSession(sess, UseConcurrentWrites(true), MaxPacketUnchecked(255<<10))
	if err != nil {
		t.Fatal(err)
	}
	f := newFile(sc, "f", "handle") // the host never answered an open either
	written := make(chan error, 1)
	go func() { _, err := f.Write(make([]byte, 32<<20)); written <- err }()
	statted := make(chan error, 1)
	go func() { _, err := sc.Stat("f"); statted <- err }()

	closed := make(chan error, 1)
	go func() { closed <- sc.Close() }()
	// The guards only end a hang; nothing here is timed.
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close of a client whose host stopped answering: still waiting 20 s on")
	}
	for what, ch := range map[string]chan error{"a write in flight": written, "a Stat in flight": statted} {
		select {
		case err := <-ch:
			if err == nil {
				t.Errorf("%s after Close: no error", what)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: still waiting 20 s after Close returned", what)
		}
	}
}
