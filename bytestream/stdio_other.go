//go:build !unix

package bytestream

import (
	"io"
	"os"
)

func pollable(f *os.File, _ int, _ string) *os.File { return f }

// shutdownWrite does nothing: the close of w is its end.
func shutdownWrite(io.Writer) {}
