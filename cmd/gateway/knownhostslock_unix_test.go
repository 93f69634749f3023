//go:build unix

package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKnownHostsLockBounded: a known_hosts lock that another process
// holds and does not let go (a run stopped mid-rewrite, an NFS server's
// lock for a client that crashed) hung every gateway cert and gateway
// proxy that wanted to rewrite the file, and so every ssh, saying
// nothing. The wait is bounded, and the error names the lock file and
// how to be rid of it; once the holder has died (killed, its lock file
// left behind) the rewrite goes ahead.
func TestKnownHostsLockBounded(t *testing.T) {
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("no flock(1) to hold the lock from another process")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "known_hosts")
	lock := filepath.Join(dir, ".known_hosts.lock")
	old := knownHostsLockWait
	knownHostsLockWait = 50 * time.Millisecond
	t.Cleanup(func() { knownHostsLockWait = old })

	// Another process takes the lock and keeps it.
	ctx := testCtx(t)
	holder := exec.CommandContext(ctx, "sh", "-c", `exec 9>>"$1" && "$2" 9 && echo locked && exec sleep 600`, "sh", lock, flock)
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	dead := false
	t.Cleanup(func() {
		if !dead {
			_ = holder.Process.Kill()
			_ = holder.Wait()
		}
	})
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		t.Fatalf("the holder did not take the lock: %q %v", line, err)
	}

	// The guard only: a wait without a bound never ends.
	gctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- pinKnownHost(path, "box", key) }()
	select {
	case err = <-errc:
	case <-gctx.Done():
		t.Fatal("pinKnownHost still waits for the lock another process holds")
	}
	if err == nil || !strings.Contains(err.Error(), lock) || !strings.Contains(err.Error(), "remove "+lock) {
		t.Fatalf("pinKnownHost with the lock held elsewhere: %v; want an error naming %s and its removal", err, lock)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("the file was written without the lock")
	}

	// The holder killed: its lock file stays, its lock does not.
	_ = holder.Process.Kill()
	_ = holder.Wait()
	dead = true
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the lock file: %v; want it left behind, for the test to mean anything", err)
	}
	if err := pinKnownHost(path, "box", key); err != nil {
		t.Fatalf("pinKnownHost after the holder died: %v", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "box "+key+"\n" {
		t.Errorf("known_hosts %q, %v", b, err)
	}
}
