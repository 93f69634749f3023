//go:build linux

package hostgate_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/sshdtest"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/sshlayer"
)

// smallDisk mounts a tmpfs of 1 MiB under a temporary directory, a full
// sandbox workspace (dockerhost's /workspace is a tmpfs of diskBytes) in
// small, unmounted at cleanup.
func smallDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0777")
	testenv.RequirePeer(t, "a tmpfs mount (root, or a namespace allowing it)", err == nil)
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// TestUploadOntoFullDiskIsENOSPC: an Upload past the room on the host's
// disk fails with an error errors.Is(err, syscall.ENOSPC) matches, the
// way through the host's tar (busybox's, whose words say 'No space left
// on device'; GNU's, whose 'Wrote only 2048 of 10240 bytes' names no
// errno) as the way without it, over sshd too, whose sftp-server answers
// a full disk a bare Failure. Before, only NoTar's did, and not over sshd.
func TestUploadOntoFullDiskIsENOSPC(t *testing.T) {
	tree := fstest.MapFS{
		"small.txt":   {Data: []byte("fits\n"), Mode: 0o644},
		"sub/big.bin": {Data: bytes.Repeat([]byte("x"), 3<<20), Mode: 0o644},
	}
	hosts := map[string]func(t *testing.T) *hostgate.Host{
		"sshlayer": func(t *testing.T) *hostgate.Host { return sshHost(t) },
		"busybox": func(t *testing.T) *hostgate.Host {
			return pathHost(t, sshHost(t), map[string]string{"sh": "", "mkdir": "", "tar": "busybox", "df": "busybox"})
		},
		"sshd": func(t *testing.T) *hostgate.Host {
			testenv.RequirePeer(t, "sshd", sshdtest.Available())
			srv := sshdtest.Start(t, sshdtest.Options{})
			h := hostgate.New(hostgate.Info{Kind: "machine"}, sshConnect(srv.Addr(), sshlayer.Auth{User: "root", PrivateKey: srv.UserKey, HostKey: srv.HostKey}))
			t.Cleanup(func() { _ = h.Close() })
			return h
		},
	}
	for name, host := range hosts {
		for _, noTar := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/tar", true: "/NoTar"}[noTar], func(t *testing.T) {
				h := host(t)
				disk := smallDisk(t)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				err := hostgate.Upload(ctx, h, tree, filepath.Join(disk, "up"), &hostgate.TransferOptions{NoTar: noTar})
				if !errors.Is(err, syscall.ENOSPC) {
					t.Errorf("Upload of 3 MiB onto a disk of 1 MiB: %v; want ENOSPC", err)
				}
			})
		}
	}
}

// TestDownloadOntoFullDiskIsENOSPC: a Download past the room on the local
// disk fails with ENOSPC, the local write's errno, whichever way it goes.
func TestDownloadOntoFullDiskIsENOSPC(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "big.bin"), bytes.Repeat([]byte("x"), 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	h := sshHost(t)
	for _, noTar := range []bool{false, true} {
		disk := smallDisk(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := hostgate.Download(ctx, h, src, filepath.Join(disk, "down"), &hostgate.TransferOptions{NoTar: noTar})
		cancel()
		if !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("NoTar %v: Download of 3 MiB onto a disk of 1 MiB: %v; want ENOSPC", noTar, err)
		}
	}
}
