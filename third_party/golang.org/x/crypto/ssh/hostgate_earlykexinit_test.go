package ssh

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func earlyServerConfig(t *testing.T) *ServerConfig {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(hostKey)
	return cfg
}

// TestHostgateServerKexInitFirst: a server sends its KEXINIT right behind
// its version line, before the client has sent anything: a client that
// waits for the version finds the KEXINIT with it.
func TestHostgateServerKexInitFirst(t *testing.T) {
	srv, cli := testConnPair(t)
	cfg := earlyServerConfig(t)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_, _, _, _ = NewServerConn(srv, cfg)
	}()
	defer func() {
		// The server waits for a version line until the conn closes.
		_ = cli.Close()
		<-served
	}()
	_ = cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(cli)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "SSH-2.0-") {
		t.Fatalf("the version line: %q, %v", line, err)
	}
	// An unencrypted binary packet: length, padding length, payload.
	var hdr [6]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		t.Fatalf("nothing after the version line while the client sent nothing: %v", err)
	}
	if n := binary.BigEndian.Uint32(hdr[:4]); n < 2 || n > maxPacket {
		t.Fatalf("a packet of %d bytes", n)
	}
	if hdr[5] != msgKexInit {
		t.Errorf("the server's first packet is message %d, want KEXINIT (%d)", hdr[5], msgKexInit)
	}
}

// TestHostgateServerJunkVersionEnds: a client whose version line the
// server refuses, after the server's KEXINIT went out, leaves no
// goroutine behind once the conn is closed.
func TestHostgateServerJunkVersionEnds(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv, cli := testConnPair(t)
	cfg := earlyServerConfig(t)
	done := make(chan error, 1)
	go func() {
		_, _, _, err := NewServerConn(srv, cfg)
		done <- err
	}()
	if _, err := cli.Write([]byte(strings.Repeat("x", 300))); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a version line of 300 bytes was taken")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not refuse the version line")
	}
	_ = cli.Close()
}
