package syncfs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"time"

	"github.com/hostgate/hostgate"
	syncfs "github.com/hostgate/hostgate/sync"
)

// The synchronous filesystem of a host: stdlib io/fs code runs on it, each
// call blocking for one round trip on the FS's own connection.
func ExampleFromHost() {
	var host *hostgate.Host // from hostgate.New; its connection carries a SyncSpec
	fsys := syncfs.FromHost(host, &syncfs.Options{Root: "/home/agent", Timeout: 10 * time.Second})
	defer fsys.Close()

	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fmt.Println(name)
		return nil
	})
	switch {
	case errors.Is(err, syscall.ENOTSUP):
		// the host offers no synchronous filesystem
	case errors.Is(err, syscall.ETIMEDOUT):
		// the host stopped answering; the next call reconnects
	}
}

// Without a spec every call fails with ENOTSUP.
func ExampleNew_notSupported() {
	fsys := syncfs.New(nil, nil)
	defer fsys.Close()
	_, err := fsys.ReadFile("etc/hostname")
	fmt.Println(errors.Is(err, syscall.ENOTSUP))
	// Output: true
}
