package dockerhost

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/mount"
)

// TestGitWorkspaceNoBindNoWorktree is the seed's "the host creates no
// worktree, copies no .git data, and never bind-mounts the host
// repository": the container of a git-worktree execution has no bind
// mount at all (only the tmpfs workspace and, with an agent binary, the
// tools volume), the repository gains no worktree, and nothing named
// .git reaches the workspace.
func TestGitWorkspaceNoBindNoWorktree(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	repo := t.TempDir()
	git(t, repo, "init", "-q")
	if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-q", "-m", "one")
	worktreesBefore := git(t, repo, "worktree", "list", "--porcelain")

	req := emptyReq(img, small())
	req.Workspace = WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: repo, Revision: "HEAD"}
	ex := provision(t, h, req)

	ins, err := cli.ContainerInspect(testCtx(t, time.Minute), ex.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins.HostConfig.Binds) != 0 {
		t.Errorf("binds %q, want none", ins.HostConfig.Binds)
	}
	for _, m := range ins.HostConfig.Mounts {
		if m.Type == mount.TypeBind {
			t.Errorf("a bind mount asked for: %+v", m)
		}
	}
	for _, m := range ins.Mounts {
		if m.Type == mount.TypeBind || strings.HasPrefix(m.Source, repo) {
			t.Errorf("a bind mount in the container: %+v", m)
		}
	}
	if _, ok := ins.HostConfig.Tmpfs[WorkspaceDir]; !ok {
		t.Errorf("the workspace is not a tmpfs: %v", ins.HostConfig.Tmpfs)
	}

	res := sh(t, h, ex.ExecutionID, `find /workspace -name .git; cat /workspace/a.txt; grep -c ' /workspace ' /proc/mounts; grep ' /workspace ' /proc/mounts | cut -d' ' -f3`)
	if res.Stdout != "a\n1\ntmpfs\n" {
		t.Errorf("workspace: %q, want a.txt's content, no .git, and /workspace one tmpfs", res.Stdout)
	}
	if after := git(t, repo, "worktree", "list", "--porcelain"); after != worktreesBefore {
		t.Errorf("the repository's worktrees changed:\nbefore:\n%s\nafter:\n%s", worktreesBefore, after)
	}
	if _, err := os.Stat(filepath.Join(repo, ".git", "worktrees")); !os.IsNotExist(err) {
		t.Errorf("the repository has .git/worktrees: %v", err)
	}
}
