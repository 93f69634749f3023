package dockerhost

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// inotifySrc takes inotify instances until it has os.Args[1] or the
// kernel refuses one, says how many it got and why it stopped; with a
// second argument it then holds them until killed.
const inotifySrc = `package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	held := 0
	var err error
	for held < n {
		if _, err = syscall.InotifyInit1(syscall.IN_CLOEXEC); err != nil {
			break
		}
		held++
	}
	if err != nil {
		fmt.Printf("held %d, then %v\n", held, err)
	} else {
		fmt.Printf("held %d\n", held)
	}
	if len(os.Args) > 2 {
		time.Sleep(100 * 365 * 24 * time.Hour)
	}
}
`

var inotifyOnce struct {
	sync.Once
	bin []byte
	err error
}

// inotifyTool builds inotifySrc as a static binary (busybox has no
// inotify applet).
func inotifyTool(t *testing.T) []byte {
	t.Helper()
	inotifyOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hostgate-inotify-")
		if err != nil {
			inotifyOnce.err = err
			return
		}
		defer os.RemoveAll(dir)
		src := filepath.Join(dir, "main.go")
		if err := os.WriteFile(src, []byte(inotifySrc), 0o600); err != nil {
			inotifyOnce.err = err
			return
		}
		bin := filepath.Join(dir, "inotify")
		cmd := exec.Command("go", "build", "-o", bin, src)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			inotifyOnce.err = err
			t.Logf("go build: %s", out)
			return
		}
		inotifyOnce.bin, inotifyOnce.err = os.ReadFile(bin)
	})
	if inotifyOnce.err != nil {
		t.Fatalf("build the inotify tool: %v", inotifyOnce.err)
	}
	return inotifyOnce.bin
}

// testOwnUID: each execution runs as a uid of its own, so what the kernel
// limits per user is not shared: with one uid for all, a sandbox holding
// every inotify instance (fs.inotify.max_user_instances) made inotify_init
// fail with EMFILE in every other sandbox.
func testOwnUID(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, &Config{Tools: []Tool{{Name: "inotify", Mode: 0o755, Data: inotifyTool(t)}}})
	a := provision(t, h, emptyReq(img, small()))
	b := provision(t, h, emptyReq(img, small()))
	ua, ub := sh(t, h, a.ExecutionID, "id -u; id -g"), sh(t, h, b.ExecutionID, "id -u; id -g")
	if ua.Stdout == ub.Stdout {
		t.Fatalf("both executions run as uid and gid %q", ua.Stdout)
	}
	for _, u := range []string{ua.Stdout, ub.Stdout} {
		ids := strings.Fields(u)
		n, err := strconv.Atoi(ids[0])
		if len(ids) != 2 || ids[0] != ids[1] || err != nil || !sandboxUID(n) {
			t.Fatalf("id -u; id -g: %q, want one number of the sandbox range for both", u)
		}
	}

	limit := strings.TrimSpace(sh(t, h, a.ExecutionID, "cat /proc/sys/fs/inotify/max_user_instances").Stdout)
	// A takes every instance its uid may have and keeps them.
	res := sh(t, h, a.ExecutionID, `/opt/hostgate/inotify 100000 hold < /dev/null > held 2>&1 &
until [ -s held ]; do sleep 0.05; done; cat held`)
	if want := "held " + limit + ", then too many open files\n"; res.Stdout != want {
		t.Fatalf("in A: %q, want %q", res.Stdout, want)
	}
	if res := sh(t, h, b.ExecutionID, "/opt/hostgate/inotify 1"); res.Stdout != "held 1\n" {
		t.Fatalf("in B, while A holds all %s inotify instances of its uid: %q, want one for B", limit, res.Stdout+res.Stderr)
	}

	// A uid is held while its container lives: an ended execution and a
	// provision that failed after its container was made give theirs back.
	bad := emptyReq(img, small())
	bad.Workspace = WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: t.TempDir(), Revision: "main"}
	if _, err := h.Provision(testCtx(t, time.Minute), bad); ErrorCode(err) != CodeInvalidRequest {
		t.Fatalf("provision from a directory that is not a repository: %v, want invalid_request", err)
	}
	for _, id := range []string{a.ExecutionID, b.ExecutionID} {
		if err := h.Terminate(testCtx(t, time.Minute), id); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.uids.len(); n != 0 {
		t.Fatalf("%d uids held with no execution left", n)
	}
}

func TestUIDSet(t *testing.T) {
	var s uidSet
	seen := map[int]bool{}
	for range 1000 {
		u := s.take()
		if !sandboxUID(u) || seen[u] {
			t.Fatalf("take gave %d: outside the range or twice", u)
		}
		seen[u] = true
	}
	if s.len() != 1000 {
		t.Fatalf("held %d, want 1000", s.len())
	}
	for u := range seen {
		s.release(u)
	}
	s.hold(legacyUID) // shared by every legacy container: not tracked
	s.hold(sandboxUIDBase + 7)
	if s.len() != 1 {
		t.Fatalf("held %d after releasing all and holding one, want 1", s.len())
	}
}

func TestParseUIDLabel(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		uid    int
		ok     bool
	}{
		{map[string]string{}, legacyUID, true},
		{map[string]string{LabelUID: "2000000042"}, 2000000042, true},
		{map[string]string{LabelUID: "0"}, 0, false},
		{map[string]string{LabelUID: "65534"}, 0, false},
		{map[string]string{LabelUID: "02000000042"}, 0, false},
		{map[string]string{LabelUID: "2100000000"}, 0, false},
		{map[string]string{LabelUID: ""}, 0, false},
	} {
		uid, ok := parseUIDLabel(tc.labels)
		if uid != tc.uid || ok != tc.ok {
			t.Errorf("%v: %d %v, want %d %v", tc.labels, uid, ok, tc.uid, tc.ok)
		}
	}
}
