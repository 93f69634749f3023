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
// after the archive's end, with the tree: over OpenSSH's sshd, which sent
// tar's exit status as tar exited, with success; over the local
// transport, whose process has no exit status before its streams end,
// saying why tar's word is missing.
func TestDownloadEndsWhenTarOutputHeld(t *testing.T) {
	for _, over := range []string{"local", "sshd"} {
		t.Run(over, func(t *testing.T) {
			h, used := heldOutputHost(t, over)
			src := t.TempDir()
			if err := os.WriteFile(filepath.Join(src, "a"), []byte("hello"), 0o644); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "dst")
			err := returnsUnheld(t, "Download", func() error { return hostgate.Download(context.Background(), h, src, dst, nil) })
			used()
			if b, rerr := os.ReadFile(filepath.Join(dst, "a")); rerr != nil || string(b) != "hello" {
				t.Errorf("the downloaded file: %q, %v; want hello", b, rerr)
			}
			switch {
			case over == "sshd" && err != nil:
				t.Errorf("Download over sshd: %v; want success, tar's exit told", err)
			case over == "local" && (err == nil || !strings.Contains(err.Error(), "session stayed open") || !strings.Contains(err.Error(), "NoTar")):
				t.Errorf("Download: %v; want it to say the host's tar session stayed open, and what to do", err)
			}
		})
	}
}

// TestUploadEndsWhenTarOutputHeld: the same host's tar, taking an
// upload, exits and its session stays open: Upload waited for its end for
// ever (or failed at its ctx). Over sshd, which tells tar's exit, it now
// succeeds shortly after. (Over the local transport nothing tells tar's
// exit before the session's end, which Upload still waits for.)
func TestUploadEndsWhenTarOutputHeld(t *testing.T) {
	h, used := heldOutputHost(t, "sshd")
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "a"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	err := returnsUnheld(t, "Upload", func() error { return hostgate.Upload(context.Background(), h, os.DirFS(src), dst, nil) })
	used()
	if err != nil {
		t.Errorf("Upload over sshd: %v; want success, tar's exit told", err)
	}
	if b, rerr := os.ReadFile(filepath.Join(dst, "a")); rerr != nil || string(b) != "hello" {
		t.Errorf("the uploaded file: %q, %v; want hello", b, rerr)
	}
}

// heldOutputHost is a Host, over the local transport or over OpenSSH's
// sshd, whose tar is a wrapper that leaves a sleep holding its stderr,
// killed at cleanup; used fails the test when the wrapper did not run.
func heldOutputHost(t *testing.T, over string) (h *hostgate.Host, used func()) {
	t.Helper()
	bin, used := heldOutputTool(t, "tar")
	t.Cleanup(hostgate.SetOutputHeldGrace(100 * time.Millisecond))
	path := bin + ":" + os.Getenv("PATH")
	if over == "local" {
		t.Setenv("PATH", path)
		h, _ = localHost(t, false)
	} else {
		srv := sshdtest.Start(t, sshdtest.Options{Config: "SetEnv PATH=" + path})
		h = hostgate.New(hostgate.Info{Kind: "machine"}, sshConnect(srv.Addr(), sshlayer.Auth{User: "root", PrivateKey: srv.UserKey, HostKey: srv.HostKey}))
		t.Cleanup(func() { _ = h.Close() })
	}
	return h, used
}

// heldOutputTool makes a directory holding a wrapper of tool that leaves
// a sleep holding its stderr (one each run), killed at cleanup; used fails the test
// when the wrapper did not run.
func heldOutputTool(t *testing.T, tool string) (bin string, used func()) {
	t.Helper()
	orig, err := exec.LookPath(tool)
	if err != nil {
		t.Fatalf("this test needs %s: %v", tool, err)
	}
	bin = t.TempDir()
	pidFile := filepath.Join(bin, "holder.pid")
	wrapper := "#!/bin/sh\nsleep 3600 >/dev/null </dev/null &\necho $! >>" + pidFile + "\nexec " + orig + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, tool), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The holder: what the call left waiting on it ends with it.
		b, _ := os.ReadFile(pidFile)
		for line := range strings.Lines(string(b)) {
			if pid, err := strconv.Atoi(strings.TrimSpace(line)); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return bin, func() {
		t.Helper()
		if _, err := os.Stat(pidFile); err != nil {
			t.Fatalf("the host's %s was not the wrapper: %v", tool, err)
		}
	}
}

// returnsUnheld runs a transfer and returns its error, failing the test
// when it is still waiting a minute on.
func returnsUnheld(t *testing.T, what string, transfer func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- transfer() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute): // a guard against a hang, not a timing
		t.Fatalf("%s still waiting a minute after the host's tar was done, its stderr held by a process it left", what)
		return nil
	}
}
