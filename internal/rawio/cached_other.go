//go:build !linux

package rawio

import "io"

// CachedReader is r: the raw cached read is Linux's (preadv2).
func CachedReader(r io.Reader) io.Reader { return r }
