package procstat

import (
	"golang.org/x/sys/unix"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// This process is live, in the session getsid names; a pid that is not
// a process is not.
func TestSessionOfSelf(t *testing.T) {
	want, err := unix.Getsid(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var buf Buf
	if sid, ok := Session(os.Getpid(), &buf); !ok || sid != want {
		t.Fatalf("Session(self) = %d %v, want %d", sid, ok, want)
	}
	if _, ok := Session(1<<30, &buf); ok {
		t.Fatal("a pid that is no process has a session")
	}
}

// Kill signals a process only when its session is a member, through the
// pidfd it returns, which becomes readable once the process has ended.
func TestKill(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &unix.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var buf Buf
	if _, ok := Kill(pid, func(sid int) bool { return sid != pid }, &buf); ok {
		t.Fatal("killed a process whose session is not a member")
	}
	if _, live := Session(pid, &buf); !live {
		t.Fatal("the process is gone after a Kill that refused it")
	}
	fd, ok := Kill(pid, func(sid int) bool { return sid == pid }, &buf)
	if !ok {
		t.Fatal("a process of a member session was not killed")
	}
	defer unix.Close(fd)
	if err := cmd.Wait(); err == nil || cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the process ended with %v, want SIGKILL", err)
	}
}
