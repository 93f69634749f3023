//go:build !linux

package sftp

import (
	"os"
	"syscall"
)

// rawWritable is Linux's (hostgate_writeraw_linux.go); elsewhere every
// write goes through os.File.WriteAt.
func rawWritable(*os.File) bool { return false }

const rawPwrite = false

func writeAtRaw(*os.File, []byte, int64) (int, syscall.Errno, bool) { return 0, syscall.EINVAL, false }

// rawBackoff is Linux's; elsewhere no write is raw.
type rawBackoff struct{}

func (*rawBackoff) use() bool { return false }
func (*rawBackoff) slowed()   {}
