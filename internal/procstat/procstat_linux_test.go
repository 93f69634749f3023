package procstat

import (
	"golang.org/x/sys/unix"
	"os"
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
