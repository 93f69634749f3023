package dockerhost

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
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

// draws returns a uidSet.draw that gives uids in turn, then fails the
// test (and draws at random, so that take ends).
func draws(t *testing.T, uids ...int) func() int {
	return func() int {
		if len(uids) == 0 {
			t.Error("more uids drawn than the test planned")
			return drawUID()
		}
		u := uids[0]
		uids = uids[1:]
		return u
	}
}

// testUIDsOfOtherGateways: a uid is drawn against every container on the
// engine, not only this host's: two gateways sharing an engine (each its
// own owner) gave the same uid to two sandboxes whenever their random
// draws met, about N²/2×10⁸ for N live ones, which then shared every
// per-uid kernel limit. Here B's first two draws are A's execution's uid.
func testUIDsOfOtherGateways(t *testing.T) {
	cli, img := engine(t)
	a := newTestHost(t, cli, nil)
	b := newTestHost(t, cli, nil)
	const taken, free = sandboxUIDBase + 4242, sandboxUIDBase + 4243
	a.uids.draw = draws(t, taken)
	ea := provision(t, a, emptyReq(img, small()))
	b.uids.draw = draws(t, taken, taken, free)
	eb := provision(t, b, emptyReq(img, small()))
	ua, ub := sh(t, a, ea.ExecutionID, "id -u").Stdout, sh(t, b, eb.ExecutionID, "id -u").Stdout
	if ua != strconv.Itoa(taken)+"\n" || ub != strconv.Itoa(free)+"\n" {
		t.Fatalf("id -u in A's execution %q, in B's %q; want %d and %d (B's execution must not take A's uid)", ua, ub, taken, free)
	}
}

// takeUID draws again when the engine has a container with the uid
// (another gateway's), and holds none it did not give out.
func TestTakeUID(t *testing.T) {
	const other = sandboxUIDBase + 7
	h := &Docker{api: &fakeDocker{list: []container.Summary{{Labels: map[string]string{LabelUID: strconv.Itoa(other)}}}}}
	h.uids.draw = draws(t, other, other+1)
	if u, err := h.takeUID(context.Background()); err != nil || u != other+1 {
		t.Fatalf("takeUID: %d %v, want %d: %d is another gateway's", u, err, other+1, other)
	}
	if n := h.uids.len(); n != 1 {
		t.Fatalf("%d uids held, want the one given out", n)
	}

	h = &Docker{api: &listFails{}}
	if _, err := h.takeUID(context.Background()); err == nil || !strings.Contains(err.Error(), "is free: engine down") {
		t.Fatalf("takeUID with an engine that does not list: %v", err)
	}
	if n := h.uids.len(); n != 0 {
		t.Fatalf("%d uids held after takeUID failed", n)
	}
}

type listFails struct{ fakeDocker }

func (*listFails) ContainerList(context.Context, container.ListOptions) ([]container.Summary, error) {
	return nil, errors.New("engine down")
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
