package execapi

import (
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/bytestream"
)

// TestUnansweredPingLeavesNothingWaiting: the watch's ping of an agent
// that keeps its tunnel up and answers no ping (its frames still
// arriving keep the tunnel's keepalive from ending it) ends with
// answered's verdict. The ping went on in a goroutine of its own until
// the tunnel ended, its comment taking it for one bounded by a 30 s write
// timeout that the tunnel turns off: one more goroutine for every tick of
// the watch (PingTimeout, 5 s) for as long as the tunnel lasted.
func TestUnansweredPingLeavesNothingWaiting(t *testing.T) {
	a, b := net.Pipe()
	sess, err := bytestream.MuxClient(a, &bytestream.MuxConfig{KeepAliveInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	// The peer reads everything and answers nothing.
	copied := make(chan struct{})
	go func() { defer close(copied); _, _ = io.Copy(io.Discard, b) }()
	defer func() { _ = sess.Close(); _ = b.Close(); <-copied }()

	if answered(t.Context(), sess, 50*time.Millisecond) {
		t.Fatal("answered: true for a peer that answers nothing")
	}
	if sess.IsClosed() {
		t.Fatal("the tunnel closed")
	}
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	if stacks := string(buf[:n]); strings.Contains(stacks, "execapi.answered") {
		t.Fatalf("a ping still waits after answered gave up on it:\n%s", stacks)
	}
}
