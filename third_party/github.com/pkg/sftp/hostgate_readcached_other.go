//go:build !linux

package sftp

import "os"

// readAtCached is Linux's (hostgate_readcached_linux.go); elsewhere every
// read goes through os.File.ReadAt.
func readAtCached(*os.File, []byte, int64) (n int, ok, unsupported bool) { return 0, false, true }
