package yamux

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

// A ping the peer never answers ends at PingContext's ctx. Ping waited
// for the answer up to ConnectionWriteTimeout, which bytestream turns off
// (the connection bounds its writes): only the session's end stopped it,
// and a peer that kept its session up without answering kept every
// ping's caller waiting, the execution watch's goroutine for each of its
// pings (one every 5 s) among them.
func TestPingContextPeerNeverAnswers(t *testing.T) {
	c1, c2 := testConnPipe(t)
	conf := testConfNoKeepAlive()
	conf.WriteInCaller = true
	conf.ConnectionWriteTimeout = time.Hour // as bytestream runs it: no bound of yamux's
	conf.LogOutput = io.Discard
	client, err := Client(c1, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// The peer reads everything and answers nothing.
	copied := make(chan struct{})
	go func() { defer close(copied); _, _ = io.Copy(io.Discard, c2) }()
	defer func() { <-copied }()
	defer c2.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := client.PingContext(ctx)
		done <- err
	}()
	guard := time.NewTimer(10 * time.Second) // a guard against a hang, not a timing
	defer guard.Stop()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("PingContext past its deadline: %v, want %v", err, context.DeadlineExceeded)
		}
	case <-guard.C:
		_ = client.Close()
		<-done
		t.Fatal("PingContext with a 100 ms deadline still waits 10 s on for a peer that never answers")
	}
	client.pingLock.Lock()
	n := len(client.pings)
	client.pingLock.Unlock()
	if n != 0 {
		t.Errorf("%d pings still wait for their answer after PingContext gave up", n)
	}
	if client.IsClosed() {
		t.Error("the session closed with the ping given up")
	}
}
