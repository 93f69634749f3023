//go:build !linux

package bytestream

import "github.com/hostgate/hostgate/internal/rawio"

// rawStream is nil: the raw calls are Linux's.
func rawStream(any) *rawio.Stream { return nil }
