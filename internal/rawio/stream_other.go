//go:build !linux

package rawio

import (
	"errors"
	"syscall"
)

// Stream is Linux's (stream_linux.go); elsewhere none is made, and its
// methods only keep callers portable.
type Stream struct{}

// Read fails: no Stream is made off Linux.
func (*Stream) Read([]byte) (int, syscall.Errno, error) { return 0, 0, errors.ErrUnsupported }

// Write fails: no Stream is made off Linux.
func (*Stream) Write([]byte) (int, syscall.Errno, error) { return 0, 0, errors.ErrUnsupported }
