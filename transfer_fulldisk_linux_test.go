//go:build linux

package hostgate_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
		// ExecProvider's way without tar (localexec has no SFTP).
		"local": func(t *testing.T) *hostgate.Host { h, _ := localHost(t, false); return h },
		"local busybox": func(t *testing.T) *hostgate.Host {
			local, _ := localHost(t, false)
			return pathHost(t, local, map[string]string{"sh": "", "mkdir": "", "tar": "busybox", "cat": "busybox", "rm": "busybox", "mv": "busybox", "stat": "busybox", "ln": "busybox", "touch": "busybox", "uname": "busybox", "df": "busybox"})
		},
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

// TestUploadShortWriteAsksDf: GNU tar's 'Wrote only' is ENOSPC where the
// host's df (GNU's, busybox's) says the disk has no room, and tar's error
// as it was where the disk has room or the host has no df: a tar that
// says so (a stand-in script) onto each.
func TestUploadShortWriteAsksDf(t *testing.T) {
	local, _ := localHost(t, false)
	for _, c := range []struct {
		name string
		full bool
		df   string // the program df is; "": none
		want bool   // ENOSPC
	}{
		{"room, GNU df", false, "df", false},
		{"full, GNU df", true, "df", true},
		{"full, busybox df", true, "busybox", true},
		{"full, no df", true, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := t.TempDir()
			commands := map[string]string{"sh": "sh", "mkdir": "mkdir", "cat": "cat"}
			if c.df != "" {
				commands["df"] = c.df
			}
			for cmd, prog := range commands {
				p, err := exec.LookPath(prog)
				if err != nil {
					testenv.RequirePeer(t, prog, false)
				}
				if err := os.Symlink(p, filepath.Join(bin, cmd)); err != nil {
					t.Fatal(err)
				}
			}
			tar := "#!/bin/sh\ncat >/dev/null\necho 'tar: f: Wrote only 2048 of 10240 bytes' >&2\nexit 2\n"
			if err := os.WriteFile(filepath.Join(bin, "tar"), []byte(tar), 0o755); err != nil {
				t.Fatal(err)
			}
			h := hostgate.Wrap(local, func(argv []string, dir string, env map[string]string) ([]string, map[string]string) {
				e := map[string]string{"PATH": bin}
				for k, v := range env {
					e[k] = v
				}
				return argv, e
			})
			dir := t.TempDir()
			if c.full {
				dir = smallDisk(t)
				if err := os.WriteFile(filepath.Join(dir, "fill"), bytes.Repeat([]byte("x"), 2<<20), 0o644); !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling the disk: %v; want ENOSPC", err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := hostgate.Upload(ctx, h, fstest.MapFS{"f": {Data: []byte("data")}}, filepath.Join(dir, "up"), nil)
			if err == nil || !strings.Contains(err.Error(), "Wrote only 2048 of 10240 bytes") {
				t.Errorf("Upload: %v; want tar's words", err)
			}
			if got := errors.Is(err, syscall.ENOSPC); got != c.want {
				t.Errorf("Upload: %v; ENOSPC %v, want %v", err, got, c.want)
			}
		})
	}
}
