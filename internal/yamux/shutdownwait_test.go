package yamux

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"
)

// slowCloseConn is a conn whose Close ends its reads and writes at once
// and then returns only when released: a WebSocket draining its
// write-behind buffer to a peer that does not read, or waiting for the
// answer to its close frame.
type slowCloseConn struct {
	io.ReadWriteCloser
	release chan struct{}
	once    sync.Once
}

func (c *slowCloseConn) Close() error {
	err := c.ReadWriteCloser.Close()
	<-c.release
	return err
}

func (c *slowCloseConn) unblock() { c.once.Do(func() { close(c.release) }) }

// TestBlockedStreamsEndWhileConnCloses (hostgate): a Read and a Write
// blocked on a session that shuts down return as soon as nothing more can
// come, not once the conn's Close has returned. They went back to their
// start whenever the session's shutdown channel was ready, and the stream
// stays open until Close, after the conn's Close, marks it closed: each
// spun at full CPU for as long as the conn's Close took.
func TestBlockedStreamsEndWhileConnCloses(t *testing.T) {
	for _, wic := range []bool{false, true} {
		name := "SendLoop"
		if wic {
			name = "WriteInCaller"
		}
		t.Run(name, func(t *testing.T) {
			cconf, sconf := testConfData(), testConfData()
			cconf.WriteInCaller, sconf.WriteInCaller = wic, wic
			c1, c2 := testConnPipe(t)
			cconn := &slowCloseConn{ReadWriteCloser: c1, release: make(chan struct{})}
			defer cconn.unblock()
			client, _ := testClientServerConfig(t, cconn, c2, cconf, sconf)

			rs, err := client.OpenStream()
			if err != nil {
				t.Fatal(err)
			}
			ws, err := client.OpenStream()
			if err != nil {
				t.Fatal(err)
			}
			// The peer never reads: the write after a window's worth waits
			// for a window update.
			if _, err := ws.Write(make([]byte, initialStreamWindow)); err != nil {
				t.Fatal(err)
			}
			readErr, writeErr := make(chan error, 1), make(chan error, 1)
			go func() { _, err := rs.Read(make([]byte, 1)); readErr <- err }()
			go func() { _, err := ws.Write([]byte("x")); writeErr <- err }()

			closed := make(chan struct{})
			go func() { _ = client.Close(); close(closed) }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			select {
			case err := <-readErr:
				if !errors.Is(err, io.EOF) {
					t.Errorf("blocked Read of a session shut down = %v, want io.EOF", err)
				}
			case <-ctx.Done():
				t.Fatal("a blocked Read still had not returned while the session's conn was closing")
			}
			select {
			case err := <-writeErr:
				if err == nil {
					t.Error("blocked Write of a session shut down succeeded")
				}
			case <-ctx.Done():
				t.Fatal("a blocked Write still had not returned while the session's conn was closing")
			}
			cconn.unblock()
			<-closed
		})
	}
}
