//go:build !linux

package deadline

import (
	"errors"
	"io"
	"os"
)

// Run is Linux-only: sandbox containers are Linux.
func Run(args []string, stdin io.Reader, dir string) error {
	return keep(args, stdin, dir, nil)
}

func keep([]string, io.Reader, string, func() error) error {
	return errors.New("the in-container deadline runs on Linux only")
}

func writeEnviron(path string) error { return nil }

func pollableStdin() *os.File { return os.Stdin }

func capTasks(n uint64) error { return nil }
