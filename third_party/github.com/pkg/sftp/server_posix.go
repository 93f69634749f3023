//go:build !windows
// +build !windows

package sftp

import (
	"io/fs"
	"os"
)

func (s *Server) openfile(path string, flag int, mode fs.FileMode) (file, error) {
	f, err := openNoWait(path, flag, mode) // hostgate: change 25
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (s *Server) lstat(name string) (os.FileInfo, error) {
	return os.Lstat(name)
}

func (s *Server) stat(name string) (os.FileInfo, error) {
	return os.Stat(name)
}
