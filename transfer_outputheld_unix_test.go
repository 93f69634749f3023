//go:build unix

package hostgate_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/sshdtest"
	"github.com/hostgate/hostgate/sshlayer"
)

// TestDownloadEndsWhenTarOutputHeld: a host whose tar leaves a process in
// the background holding the session's stderr (as one its shell's
// startup files start does) sends the whole archive, and then its session
// never ends. Download waited for that end for ever (without a deadline;
// with one, it failed at its ctx whatever came); it now returns shortly
// after the archive's end, with the tree, saying why tar's word is
// missing.
func TestDownloadEndsWhenTarOutputHeld(t *testing.T) {
	for _, over := range []string{"local", "sshd"} {
		t.Run(over, func(t *testing.T) { downloadTarOutputHeld(t, over) })
	}
}

// downloadTarOutputHeld downloads through a tar wrapper that leaves a
// sleep holding its stderr, over the local transport (whose process has
// no exit status before its streams end) or over OpenSSH's sshd (which
// sends tar's exit status as tar exits, and ends the session only once
// the sleep let its stderr go).
func downloadTarOutputHeld(t *testing.T, over string) {
	realTar, err := exec.LookPath("tar")
	if err != nil {
		t.Fatalf("this test needs tar: %v", err)
	}
	bin := t.TempDir()
	pidFile := filepath.Join(bin, "holder.pid")
	wrapper := "#!/bin/sh\nsleep 3600 >/dev/null </dev/null &\necho $! >" + pidFile + "\nexec " + realTar + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "tar"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The holder: what the download left waiting on it ends with it.
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	defer hostgate.SetTarOutputGrace(100 * time.Millisecond)()
	path := bin + ":" + os.Getenv("PATH")
	var h *hostgate.Host
	if over == "local" {
		t.Setenv("PATH", path)
		h, _ = localHost(t, false)
	} else {
		srv := sshdtest.Start(t, sshdtest.Options{Config: "SetEnv PATH=" + path})
		h = hostgate.New(hostgate.Info{Kind: "machine"}, sshConnect(srv.Addr(), sshlayer.Auth{User: "root", PrivateKey: srv.UserKey, HostKey: srv.HostKey}))
		t.Cleanup(func() { _ = h.Close() })
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "a"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	done := make(chan error, 1)
	go func() { done <- hostgate.Download(context.Background(), h, src, dst, nil) }()
	select {
	case err = <-done:
	case <-time.After(time.Minute): // a guard against a hang, not a timing
		t.Fatal("Download still waiting a minute after the host's tar sent its archive, its stderr held by a process it left")
	}
	if b, rerr := os.ReadFile(filepath.Join(dst, "a")); rerr != nil || string(b) != "hello" {
		t.Errorf("the downloaded file: %q, %v; want hello", b, rerr)
	}
	if _, serr := os.Stat(pidFile); serr != nil {
		t.Fatalf("the host's tar was not the wrapper: %v", serr)
	}
	switch {
	case over == "sshd" && err != nil:
		// sshd told tar's exit 0 as tar exited.
		t.Errorf("Download over sshd: %v; want success, the exit told", err)
	case over == "local" && (err == nil || !strings.Contains(err.Error(), "session stayed open") || !strings.Contains(err.Error(), "NoTar")):
		t.Errorf("Download: %v; want it to say the host's tar session stayed open, and what to do", err)
	}
}
