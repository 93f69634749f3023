//go:build linux

package accept

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// TestNextRealEMFILE runs Next against a process really out of
// descriptors: the connection waits in the backlog until one is free.
func TestNextRealEMFILE(t *testing.T) {
	ln := listen(t)
	var told atomic.Int32
	got := make(chan error, 1)
	restore := testenv.ExhaustFDs(t)
	c, err := net.Dial("tcp", ln.Addr().String()) // takes the one descriptor left
	if err != nil {
		restore()
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		a, err := Next(context.Background(), ln, func(err error, _ time.Duration) {
			if errors.Is(err, syscall.EMFILE) {
				told.Add(1)
			}
		})
		if err == nil {
			a.Close()
		}
		got <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for told.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	restore()
	if told.Load() == 0 {
		t.Fatal("accept never met EMFILE")
	}
	if err := <-got; err != nil {
		t.Fatalf("Next after the descriptors came back: %v", err)
	}
}
