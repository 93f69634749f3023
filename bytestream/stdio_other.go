//go:build !unix

package bytestream

import "os"

func pollable(f *os.File, _ int, _ string) *os.File { return f }
