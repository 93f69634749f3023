//go:build unix

package syncfs

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/hostgate/hostgate"
)

// TestReadDirOfAFileIsENOTDIRAlone: ReadDir of a file fails with ENOTDIR
// and does not say the file does not exist, as os.ReadDir. Over OpenSSH's
// sftp-server, which answers it "no such file", the error read "file does
// not exist" and matched fs.ErrNotExist as well as ENOTDIR, so a caller
// that makes a directory it finds missing was told to make one over a
// file that is there.
func TestReadDirOfAFileIsENOTDIRAlone(t *testing.T) {
	root, _ := tree(t)
	specs := map[string]*hostgate.SyncSpec{"agent": agentSpec(t), "openssh": newServer(t).spec()}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			fsys := New(spec, &Options{Root: root})
			defer fsys.Close()
			_, err := fsys.ReadDir("hello.txt")
			if !errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), "does not exist") {
				t.Errorf("ReadDir of a file: %v; want ENOTDIR, not ErrNotExist", err)
			}
		})
	}
}
