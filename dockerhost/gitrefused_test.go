package dockerhost

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/hostgate/hostgate/internal/testenv"
)

// engineStamp is t as the engine's events API takes it.
func engineStamp(t time.Time) string {
	return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())
}

// containersCreated is how many containers of h's owner the engine
// reports created between since and now: its events, which a container
// made and removed within the window leaves too.
func containersCreated(t *testing.T, cli *client.Client, h *Docker, since time.Time) int {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	msgs, errs := cli.Events(ctx, events.ListOptions{
		Since: engineStamp(since),
		Until: engineStamp(time.Now()),
		Filters: filters.NewArgs(
			filters.Arg("type", string(events.ContainerEventType)),
			filters.Arg("event", string(events.ActionCreate)),
			filters.Arg("label", LabelOwner+"="+h.owner),
		),
	})
	n := 0
	for {
		select {
		case <-msgs:
			n++
		case err := <-errs:
			if !errors.Is(err, io.EOF) {
				t.Fatalf("engine events: %v", err)
			}
			return n
		}
	}
}

// testGitRefusedBeforeEngine: a git-worktree provision whose repository
// or revision git refuses is answered before any container is made: each
// created one and removed it again (about 1 s) before the same answer.
func testGitRefusedBeforeEngine(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	repo := t.TempDir()
	oneFileRepo(t, repo, "a", "a\n")
	if err := os.Mkdir(filepath.Join(repo, "untracked"), 0o755); err != nil {
		t.Fatal(err)
	}

	since := time.Now()
	for _, tc := range []struct {
		name, repo, rev, field, says string
	}{
		{"not a commit", repo, "no-such-branch", "workspace.revision", `"no-such-branch" is not a commit in the repository`},
		{"a blob", repo, "HEAD:a", "workspace.revision", `"HEAD:a" is not a commit in the repository`},
		{"not a repository", t.TempDir(), "HEAD", "workspace.repositoryPath", "is not a git repository"},
		{"no such path", filepath.Join(repo, "gone"), "HEAD", "workspace.repositoryPath", "is not a git repository"},
		{"untracked", filepath.Join(repo, "untracked"), "HEAD", "workspace.repositoryPath", "is a directory the git repository around it does not track: name the repository's top directory"},
	} {
		req := emptyReq(img, small())
		req.Workspace = WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: tc.repo, Revision: tc.rev}
		t0 := time.Now()
		_, err := h.Provision(testCtx(t, 2*time.Minute), req)
		var e *Error
		if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != tc.field || !strings.Contains(e.Message, tc.says) {
			t.Errorf("%s: %v, want invalid_request on %s saying %q", tc.name, err, tc.field, tc.says)
			continue
		}
		t.Logf("%s: answered in %v: %s", tc.name, time.Since(t0).Round(time.Millisecond), e.Message)
	}
	if n := containersCreated(t, cli, h, since); n != 0 {
		t.Errorf("refused provisions created %d containers, want none", n)
	}

	// The events are there to see: a tracked directory is served, and
	// its container counted.
	if err := os.Mkdir(filepath.Join(repo, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "sub", "b"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", "sub")
	git(t, repo, "commit", "-q", "-m", "sub")
	req := emptyReq(img, small())
	req.Workspace = WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: filepath.Join(repo, "sub"), Revision: "HEAD"}
	ex := provision(t, h, req)
	if got := sh(t, h, ex.ExecutionID, "ls -A").Stdout; got != "b\n" {
		t.Errorf("a tracked directory's workspace holds %q, want its own files, b", got)
	}
	if n := containersCreated(t, cli, h, since); n != 1 {
		t.Errorf("the engine reports %d containers created, want 1 (the provision served)", n)
	}
}

// chownTree gives every entry under root to uid.
func chownTree(t *testing.T, root string, uid int) {
	t.Helper()
	if err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestGitSafeDirectory: the refusal of a repository another user owns
// offers the gateway's user's safe.directory, and the command it says
// does what it says: run against the gateway's global git config (here
// GIT_CONFIG_GLOBAL, a file of the test's: no one's real config is
// touched), the same provision is served with the commit's files. Not in
// TestEngine: its tests run at once, and the environment is the process's.
func TestGitSafeDirectory(t *testing.T) {
	cli, img := engine(t)
	testenv.RequirePeer(t, "root (to chown a repository to another uid)", os.Geteuid() == 0)
	global := filepath.Join(t.TempDir(), "gitconfig")
	t.Setenv("GIT_CONFIG_GLOBAL", global) // restored when the test ends
	h := newTestHost(t, cli, nil)
	repo := filepath.Join(t.TempDir(), "it's a repo")
	oneFileRepo(t, repo, "a.txt", "from the commit\n")
	chownTree(t, repo, 4242)

	req := emptyReq(img, small())
	req.Workspace = WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: repo, Revision: "HEAD"}
	_, err := h.Provision(testCtx(t, 2*time.Minute), req)
	var e *Error
	if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != "workspace.repositoryPath" {
		t.Fatalf("a repository uid 4242 owns: %v, want invalid_request on workspace.repositoryPath", err)
	}
	const fix = "git config --global --add safe.directory "
	i := strings.LastIndex(e.Message, fix)
	if i < 0 {
		t.Fatalf("%q does not say %q", e.Message, fix)
	}
	command := e.Message[i:]
	t.Logf("running what the refusal says: %s", command)
	if out, err := exec.Command("sh", "-c", command).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
	if b, err := os.ReadFile(global); err != nil || !strings.Contains(string(b), repo) {
		t.Fatalf("the global config after %s: %q, %v; want it naming %s", command, b, err, repo)
	}

	ex := provision(t, h, req)
	if got := sh(t, h, ex.ExecutionID, "cat a.txt; ls -A").Stdout; got != "from the commit\na.txt\n" {
		t.Errorf("the workspace of a safe.directory repository holds %q, want the commit's a.txt", got)
	}
}

// testGitRefusedKeepsThePool: a refused git-worktree provision leaves the
// warm pool as it was. Pooled containers are keyed by image, resources
// and network, not workspace: one took the warm container, loaded nothing
// into it and removed it, and the pool made another.
func testGitRefusedKeepsThePool(t *testing.T) {
	cli, img := engine(t)
	req := emptyReq(img, small())
	h := newPoolHost(t, cli, PoolConfig{Size: 1, Keys: []ProvisionRequest{req}})
	waitPool(t, h, "a warm container", func(s PoolStats) bool { return s.Ready == 1 })
	req.Workspace = WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: t.TempDir(), Revision: "HEAD"}
	_, err := h.Provision(testCtx(t, 2*time.Minute), req)
	var e *Error
	if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != "workspace.repositoryPath" {
		t.Fatalf("a directory that is no repository: %v, want invalid_request on workspace.repositoryPath", err)
	}
	if s := h.PoolStats(); s.Hits != 0 || s.Misses != 0 || s.Fills != 1 || s.Ready != 1 {
		t.Fatalf("pool after a refused provision: %+v, want its one warm container unclaimed, none made since", s)
	}
}
