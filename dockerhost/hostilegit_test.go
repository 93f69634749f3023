package dockerhost

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// gitIn runs git in dir with stdin, for the plumbing that makes trees git
// checkout would refuse.
func gitIn(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// testGitImportRefused: a revision whose archive tar cannot unpack (an
// entry through a symbolic link out of the workspace, a path past 4096
// bytes), or one git cannot archive (an object missing), is refused as
// invalid_request naming workspace.revision or workspace.repositoryPath in
// tar's or git's words, cut, with what to do, and leaves nothing: each
// answered 502 engine_error, the engine blamed.
func testGitImportRefused(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	repo := t.TempDir()
	git(t, repo, "init", "-q")
	blob := gitIn(t, repo, "hi\n", "hash-object", "-w", "--stdin")

	// "out" twice: a symbolic link to /dev/shm and a directory holding
	// passwd, which tar would write through the link.
	link := gitIn(t, repo, "/dev/shm", "hash-object", "-w", "--stdin")
	sub := gitIn(t, repo, "100644 blob "+blob+"\tpasswd\n", "mktree")
	top := gitIn(t, repo, "120000 blob "+link+"\tout\n040000 tree "+sub+"\tout\n", "mktree")
	throughLink := gitIn(t, repo, "", "commit-tree", "-m", "through a link", top)

	// A file 25 directories of 200 bytes deep: 5026 bytes of path.
	long := strings.Repeat(strings.Repeat("d", 200)+"/", 25) + "f"
	gitIn(t, repo, "", "update-index", "--add", "--cacheinfo", "100644,"+blob+","+long)
	tooLong := gitIn(t, repo, "", "commit-tree", "-m", "too long", gitIn(t, repo, "", "write-tree"))

	// A revision one of whose files' object is gone.
	broken := t.TempDir()
	oneFileRepo(t, broken, "a", "hello\n")
	gone := git(t, broken, "rev-parse", "HEAD:a")
	if err := os.Remove(filepath.Join(broken, ".git", "objects", gone[:2], gone[2:])); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, repo, rev, field string
		says                   []string
	}{
		{"through a link", repo, throughLink, "workspace.revision", []string{"do not unpack into a workspace (tar: ", "'out'", "import another revision"}},
		{"a path too long", repo, tooLong, "workspace.revision", []string{"File name too long", "shorten it in the repository"}},
		{"an object gone", broken, "HEAD", "workspace.repositoryPath", []string{"git archive of revision", gone, "git fsck"}},
	} {
		req := emptyReq(img, small())
		req.Workspace = WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: tc.repo, Revision: tc.rev}
		_, err := h.Provision(testCtx(t, 2*time.Minute), req)
		var e *Error
		if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != tc.field {
			t.Errorf("%s: %v, want invalid_request on %s", tc.name, err, tc.field)
			continue
		}
		t.Logf("%s: %s", tc.name, e.Message)
		for _, s := range tc.says {
			if !strings.Contains(e.Message, s) {
				t.Errorf("%s: %q does not say %q", tc.name, e.Message, s)
			}
		}
		if len(e.Message) > 1024 || len(err.Error()) > 2048 {
			t.Errorf("%s: a message of %d bytes, an error of %d: tar's words not cut", tc.name, len(e.Message), len(err.Error()))
		}
	}
	if n := len(ownerContainers(t, cli, h)); n != 0 {
		t.Errorf("refused imports left %d containers", n)
	}
}

// testGitNotOwned: git (2.35.2 on) refuses a repository another user owns
// ("detected dubious ownership", exit 128), and a git-worktree workspace
// of one answered `workspace.revision: "HEAD" is not a commit in the
// repository` (audit42), sending its caller after a revision that is
// there. It is refused on workspace.repositoryPath, naming the
// repository, its owner and the gateway's user, and both fixes, before
// any container is made.
func testGitNotOwned(t *testing.T) {
	cli, img := engine(t)
	testenv.RequirePeer(t, "root (to chown a repository to another uid)", os.Geteuid() == 0)
	h := newTestHost(t, cli, nil)
	// A name a shell would split, so the commands it says are quoted.
	repo := filepath.Join(t.TempDir(), "it's a repo")
	oneFileRepo(t, repo, "a", "a\n")
	const uid = 4242
	chownTree(t, repo, uid)

	since := time.Now()
	for _, dir := range []string{repo, filepath.Join(repo, ".git")} {
		req := emptyReq(img, small())
		req.Workspace = WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: dir, Revision: "HEAD"}
		_, err := h.Provision(testCtx(t, 2*time.Minute), req)
		var e *Error
		if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != "workspace.repositoryPath" {
			t.Fatalf("%s owned by uid %d: %v, want invalid_request on workspace.repositoryPath", dir, uid, err)
		}
		t.Logf("%s: %s", dir, e.Message)
		// git names the directory it found the repository in.
		quoted := "'" + strings.ReplaceAll(dir, "'", `'\''`) + "'"
		for _, s := range []string{
			"git refuses the repository at " + dir + ", as it is owned by uid 4242 and the gateway runs as uid 0",
			"make the gateway's user own it (chown -R 0 " + quoted + ")",
			"only if uid 4242 is trusted (git archive runs the filters",
			"git config --global --add safe.directory " + quoted,
		} {
			if !strings.Contains(e.Message, s) {
				t.Errorf("%s: %q does not say %q", dir, e.Message, s)
			}
		}
	}
	// Refused before any container was made, not only with none left.
	if n := containersCreated(t, cli, h, since); n != 0 {
		t.Errorf("refused provisions created %d containers, want none", n)
	}
}
