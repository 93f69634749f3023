//go:build unix

package testenv

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// RefusedAddr refuses every dial, promptly, and keeps doing so.
func TestRefusedAddr(t *testing.T) {
	addr := RefusedAddr(t)
	for range 3 {
		c, err := net.DialTimeout("tcp", addr, 30*time.Second)
		if err == nil {
			c.Close()
			t.Fatalf("dial %s succeeded", addr)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial %s: %v, want ECONNREFUSED", addr, err)
		}
	}
}
