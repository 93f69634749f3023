package dockerhost

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/hostgate/hostgate/internal/testenv"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// oneFileRepo makes dir (made if missing) a git repository whose one
// commit, HEAD, holds name with content.
func oneFileRepo(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q")
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", name)
	git(t, dir, "commit", "-q", "-m", name)
}

// ownerContainers lists the containers of h's owner, stopped ones too.
func ownerContainers(t *testing.T, cli *client.Client, h *Docker) []container.Summary {
	t.Helper()
	list, err := cli.ContainerList(testCtx(t, time.Minute), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelOwner+"="+h.owner))})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// A git revision arrives without .git, owned by the execution's user, with
// its modes and symlinks; a bad revision, a non-repository or a revision
// bigger than the disk fail with the field named and leave no container.
func testGitWorkspace(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	repo := t.TempDir()
	git(t, repo, "init", "-q")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(repo, "a.txt"), []byte("v1\n"), 0o644))
	must(os.MkdirAll(filepath.Join(repo, "bin"), 0o755))
	must(os.WriteFile(filepath.Join(repo, "bin", "run.sh"), []byte("#!/bin/sh\necho ran\n"), 0o755))
	must(os.Symlink("a.txt", filepath.Join(repo, "link")))
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-q", "-m", "v1")
	v1 := git(t, repo, "rev-parse", "HEAD")
	must(os.WriteFile(filepath.Join(repo, "a.txt"), []byte("v2\n"), 0o644))
	must(os.WriteFile(filepath.Join(repo, "big"), bytes.Repeat([]byte{1}, 9<<20), 0o644))
	git(t, repo, "commit", "-q", "-am", "v2")
	git(t, repo, "add", "big")
	git(t, repo, "commit", "-q", "-m", "big")

	untracked := filepath.Join(repo, "untracked")
	must(os.Mkdir(untracked, 0o755))

	req := emptyReq(img, small())
	req.Workspace = WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: repo, Revision: v1[:12]}
	ex := provision(t, h, req)
	res := sh(t, h, ex.ExecutionID, `cat a.txt; ls -A; stat -c '%u:%g %a %F %n' a.txt bin/run.sh link; readlink link; ./bin/run.sh`)
	u := uidOf(t, h, ex.ExecutionID)
	u += ":" + u
	want := "v1\na.txt\nbin\nlink\n" + u + " 644 regular file a.txt\n" + u + " 755 regular file bin/run.sh\n" + u + " 777 symbolic link link\na.txt\nran\n"
	if res.Stdout != want {
		t.Fatalf("git workspace:\n%s\nwant:\n%s\nstderr %s", res.Stdout, want, res.Stderr)
	}

	for _, tc := range []struct {
		ws    WorkspaceSpec
		field string
	}{
		{WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: repo, Revision: "no-such-branch"}, "workspace.revision"},
		{WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: t.TempDir(), Revision: "main"}, "workspace.repositoryPath"},
		// A directory inside the repository that it does not track: git
		// finds the repository above it, then git archive fails; that was
		// answered as the engine's failure, tar's "short read".
		{WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: untracked, Revision: v1}, "workspace.repositoryPath"},
		{WorkspaceSpec{Kind: WorkspaceGitWorktree, RepositoryPath: repo, Revision: "main"}, "workspace.revision"}, // 9 MiB > 8 MiB disk
	} {
		req.Workspace = tc.ws
		_, err := h.Provision(testCtx(t, 2*time.Minute), req)
		var e *Error
		if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != tc.field {
			t.Errorf("%+v: got %v, want invalid_request on %s", tc.ws, err, tc.field)
		}
	}
	if n := len(ownerContainers(t, cli, h)); n != 1 {
		t.Fatalf("failed provisions left containers: %d, want only the first", n)
	}
}

func asError(err error, e **Error) bool {
	if err == nil {
		return false
	}
	var x *Error
	ok := errorsAs(err, &x)
	*e = x
	return ok
}

// treeScript lists a tree with everything restore must keep: names, types,
// modes, owners, sizes, link targets and content sums.
const treeScript = `cd /workspace && find . | sort | while read -r f; do stat -c '%n %F %a %u %s' "$f"; [ -L "$f" ] && readlink "$f"; [ -f "$f" ] && [ ! -L "$f" ] && md5sum < "$f"; done`

// tree is treeScript's listing of execution id's workspace, after script
// (when not empty), with id's own uid written OWNER: a restore runs as a
// uid of its own, and must own every entry, as the checkpointed one did.
func tree(t *testing.T, h *Docker, id, script string) string {
	t.Helper()
	if script != "" {
		script += " && "
	}
	return strings.ReplaceAll(sh(t, h, id, script+treeScript).Stdout, " "+uidOf(t, h, id)+" ", " OWNER ")
}

// Checkpoint then restore gives back identical files; checkpoint waits for
// a running exec; a tampered checkpoint fails and leaves no container.
func testCheckpointRestore(t *testing.T) {
	cli, img := engine(t)
	dir := t.TempDir()
	h := newTestHost(t, cli, &Config{CheckpointDir: dir})
	req := emptyReq(img, small())
	req.Env = map[string]string{"MODE": "mode-value-1"}
	ex := provision(t, h, req)
	sh(t, h, ex.ExecutionID, `cd /workspace && mkdir -p src/deep empty && chmod 710 empty &&
echo hello > src/a.txt && chmod 600 src/a.txt && printf '#!/bin/sh\n' > src/run && chmod 755 src/run &&
head -c 100000 /dev/urandom > src/deep/blob && chmod 640 src/deep/blob && ln -s src/a.txt top-link &&
ln -s /nowhere dangling && echo spaced > 'with space'`)
	before, uid := tree(t, h, ex.ExecutionID, ""), uidOf(t, h, ex.ExecutionID)
	for _, want := range []string{"./empty directory 710 OWNER", "./top-link symbolic link 777 OWNER", "./src/deep directory 755 OWNER", "./top-link symbolic link", "src/a.txt\n", "./src/a.txt regular file 600", "./src/run regular file 755", "./dangling symbolic link", "./with space regular file"} {
		if !strings.Contains(before, want) {
			t.Fatalf("tree listing lacks %q:\n%s", want, before)
		}
	}

	// A running exec holds the checkpoint back: the file it writes after
	// the checkpoint was asked for is in the checkpoint.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		res, err := h.Exec(testCtx(t, time.Minute), ex.ExecutionID, ExecRequest{Command: "/bin/sh", Args: []string{"-c", "touch /workspace/started; sleep 2; echo late > /workspace/late; rm /workspace/started"}, TimeoutMs: 60_000})
		if err != nil || res.ExitCode != 0 {
			t.Errorf("slow exec: %v %+v", err, res)
		}
	}()
	// Execs share the lock, so this one can see the slow one start.
	sh(t, h, ex.ExecutionID, `i=0; until [ -e /workspace/started ] || [ -e /workspace/late ]; do sleep 0.05; i=$((i+1)); [ $i -gt 1000 ] && exit 1; done`)
	cp, err := h.Checkpoint(testCtx(t, time.Minute), ex.ExecutionID, CheckpointRequest{Reason: "handoff"})
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(cp.CheckpointID) != 32 || cp.SizeBytes == 0 || len(cp.SHA256) != 64 {
		t.Fatalf("checkpoint %+v", cp)
	}
	raw, err := os.ReadFile(filepath.Join(dir, cp.CheckpointID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "mode-value-1") {
		t.Fatalf("manifest holds an env value:\n%s", raw)
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil || m.Version != 1 || m.Reason != "handoff" || m.SizeBytes != cp.SizeBytes {
		t.Fatalf("manifest %s: %v", raw, err)
	}
	if err := h.Terminate(testCtx(t, time.Minute), ex.ExecutionID); err != nil {
		t.Fatal(err)
	}

	rex, err := h.Restore(testCtx(t, 2*time.Minute), RestoreRequest{CheckpointID: cp.CheckpointID, Env: map[string]string{"MODE": "two"}})
	if err != nil {
		t.Fatal(err)
	}
	if rex.RestoredFrom != cp.CheckpointID || rex.ExecutionID == ex.ExecutionID || rex.Resources != ex.Resources {
		t.Fatalf("restored %+v", rex)
	}
	if uidOf(t, h, rex.ExecutionID) == uid {
		t.Fatalf("the restored execution runs as the checkpointed one's uid %s", uid)
	}
	after := tree(t, h, rex.ExecutionID, "rm late")
	if after != before {
		t.Fatalf("restored tree differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := sh(t, h, rex.ExecutionID, `echo $MODE`).Stdout; got != "two\n" {
		t.Fatalf("restored env MODE=%q, want the value given to Restore", got)
	}
	if err := h.Terminate(testCtx(t, time.Minute), rex.ExecutionID); err != nil {
		t.Fatal(err)
	}

	tamper(t, filepath.Join(dir, cp.CheckpointID+".tar"), "hello\n")
	_, err = h.Restore(testCtx(t, 2*time.Minute), RestoreRequest{CheckpointID: cp.CheckpointID})
	var e *Error
	if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != "checkpointId" {
		t.Fatalf("tampered restore: %v, want invalid_request on checkpointId", err)
	}
	for _, c := range ownerContainers(t, cli, h) {
		waitRemoved(t, cli, c.ID, time.Minute)
	}
	if _, err := h.Restore(testCtx(t, time.Minute), RestoreRequest{CheckpointID: newCheckpointID()}); ErrorCode(err) != CodeNotFound {
		t.Fatalf("unknown checkpoint: %v", err)
	}
	if _, err := h.Restore(testCtx(t, time.Minute), RestoreRequest{CheckpointID: "../x"}); ErrorCode(err) != CodeInvalidRequest {
		t.Fatalf("malformed checkpoint id: %v", err)
	}
}

// tamper flips one byte of content, a file's in the checkpoint's tar at
// tarPath: tar alone would accept it, its SHA-256 check must not.
func tamper(t *testing.T, tarPath, content string) {
	t.Helper()
	data, err := os.ReadFile(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(content))
	if i < 0 {
		t.Fatalf("%q not found in the tar", content)
	}
	data[i] ^= 1
	if err := os.WriteFile(tarPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A restarted host adopts the live executions of its owner and reaps
// expired ones.
func testAdoptAndReap(t *testing.T) {
	cli, img := engine(t)
	owner := uniqueOwner()
	a := newTestHost(t, cli, &Config{Owner: owner})
	x := provision(t, a, emptyReq(img, small()))
	y := provision(t, a, emptyReq(img, small()))
	xUID := uidOf(t, a, x.ExecutionID)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	b := newTestHost(t, cli, &Config{Owner: owner})
	if got := len(b.List()); got != 2 {
		t.Fatalf("adopted %d executions, want 2", got)
	}
	// Its commands keep the uid its workspace belongs to.
	if res := sh(t, b, x.ExecutionID, "echo adopted; id -u; touch f && echo wrote"); res.Stdout != "adopted\n"+xUID+"\nwrote\n" {
		t.Fatalf("exec on adopted: %q, want its uid %s and a writable workspace", res.Stdout, xUID)
	}
	// A new execution of the restarted host gets none an adopted one holds.
	if b.uids.len() != 2 {
		t.Fatalf("restarted host holds %d uids, want the 2 adopted executions'", b.uids.len())
	}
	got, err := b.Get(testCtx(t, time.Minute), y.ExecutionID)
	if err != nil || got.ContainerID != y.ContainerID || got.Resources != y.Resources || !got.ExpiresAt.Equal(y.ExpiresAt.Truncate(time.Second)) {
		t.Fatalf("adopted %+v (%v), want %+v", got, err, y)
	}
	_ = b.Close()

	later := func() time.Time { return time.Now().Add(time.Hour) }
	tombs := newMemTombs()
	c := newTestHost(t, cli, &Config{Owner: owner, Now: later, Tombstones: tombs})
	if len(c.List()) != 0 {
		t.Fatalf("expired executions adopted: %v", c.List())
	}
	waitRemoved(t, cli, x.ContainerID, time.Minute)
	waitRemoved(t, cli, y.ContainerID, time.Minute)
	// Reaped ones ended: gone, here and to the next host.
	d := newTestHost(t, cli, &Config{Owner: owner, Tombstones: tombs})
	for _, id := range []string{x.ExecutionID, y.ExecutionID} {
		if _, err := c.Get(testCtx(t, time.Minute), id); ErrorCode(err) != CodeGone {
			t.Fatalf("reaped execution: %v, want gone", err)
		}
		if _, err := d.Get(testCtx(t, time.Minute), id); ErrorCode(err) != CodeGone {
			t.Fatalf("reaped execution, to the next host: %v, want gone", err)
		}
	}
}

// An image without tar, without sleep or without sh fails at provision
// with a clear error and leaves no container, with tools (their volume is
// written through a container of the first image provisioned, here one
// that fails) and without.
func testImageMustHaveShSleepTar(t *testing.T) {
	cli, _ := engine(t)
	busybox, err := os.ReadFile("/bin/busybox")
	// The test image itself comes from it (scripts/env.sh).
	testenv.RequirePeer(t, "busybox-static at /bin/busybox", err == nil)
	refs := map[string]string{}
	for name, links := range map[string][]string{"no-tar": {"sh", "sleep"}, "no-sleep": {"sh", "tar"}, "no-sh": {"sleep", "tar"}, "complete": {"sh", "sleep", "tar"}} {
		refs[name] = importImage(t, cli, busybox, links)
	}
	tools := []Tool{{Name: "hello", Mode: 0o755, Data: []byte("#!/bin/sh\necho tool\n")}}
	for hostName, cfg := range map[string]*Config{"without tools": {AllowUnpinnedImages: true}, "with tools": {AllowUnpinnedImages: true, Tools: tools}} {
		h := newTestHost(t, cli, cfg)
		for name, ref := range refs {
			ex, err := h.Provision(testCtx(t, 2*time.Minute), emptyReq(ref, small()))
			if name == "complete" {
				if err != nil {
					t.Fatalf("%s, %s: %v", hostName, name, err)
				}
				if len(cfg.Tools) > 0 {
					if res := sh(t, h, ex.ExecutionID, ToolsDir+"/hello"); res.Stdout != "tool\n" {
						t.Errorf("%s: the tool said %q", hostName, res.Stdout)
					}
				}
				if err := h.Terminate(testCtx(t, time.Minute), ex.ExecutionID); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err == nil {
				_ = h.Terminate(testCtx(t, time.Minute), ex.ExecutionID)
			}
			var e *Error
			if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != "image" || !strings.Contains(e.Message, "/bin/sh, sleep and tar") {
				t.Errorf("%s, %s: got %v, want invalid_request on image", hostName, name, err)
			}
		}
		for _, c := range ownerContainers(t, cli, h) {
			waitRemoved(t, cli, c.ID, time.Minute)
		}
	}
}

func importImage(t *testing.T, cli *client.Client, busybox []byte, links []string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755})
	_ = tw.WriteHeader(&tar.Header{Name: "workspace/", Typeflag: tar.TypeDir, Mode: 0o755})
	_ = tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(busybox))})
	_, _ = tw.Write(busybox)
	for _, l := range links {
		_ = tw.WriteHeader(&tar.Header{Name: "bin/" + l, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777})
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ref := "hostgate-test/" + strings.Join(links, "-") + ":" + uniqueOwner()
	rc, err := cli.ImageImport(testCtx(t, time.Minute), image.ImportSource{Source: &buf, SourceName: "-"}, ref, image.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = bytes.NewBuffer(nil).ReadFrom(rc)
	_ = rc.Close()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true})
	})
	return ref
}

var errorsAs = errors.As

// putCheckpoint stores a consistent checkpoint (right size and sha256)
// whose tar holds one file of n bytes.
func putCheckpoint(t *testing.T, s CheckpointStore, img string, n int) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "./big", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(n)})
	_, _ = tw.Write(bytes.Repeat([]byte{7}, n))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	m := validManifest(buf.Bytes())
	m.Request = emptyReq(img, small())
	ctx := testCtx(t, time.Minute)
	w, err := s.Create(ctx, m.CheckpointID)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write(buf.Bytes())
	if err := w.Commit(m); err != nil {
		// Over the disk bound: write the manifest anyway, as a tampered
		// store would, to check Restore refuses it on read.
		data, _ := json.Marshal(m)
		ls := s.(*LocalStore)
		_ = os.WriteFile(filepath.Join(ls.Dir, m.CheckpointID+".tar"), buf.Bytes(), 0o600)
		if err := os.WriteFile(filepath.Join(ls.Dir, m.CheckpointID+".json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return m.CheckpointID
}

// A checkpoint bigger than the disk limit is refused, before provisioning
// when its manifest says so, and by the full tmpfs when its files do not
// fit; neither leaves a container.
func testRestoreTooLarge(t *testing.T) {
	cli, img := engine(t)
	dir := t.TempDir()
	h := newTestHost(t, cli, &Config{CheckpointDir: dir})
	for name, n := range map[string]int{"over the tar bound": 12 << 20, "over the tmpfs": 8<<20 + 512<<10} {
		id := putCheckpoint(t, h.store, img, n)
		_, err := h.Restore(testCtx(t, 2*time.Minute), RestoreRequest{CheckpointID: id})
		t.Logf("%s: %v", name, err)
		var e *Error
		if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != "checkpointId" {
			t.Errorf("%s: got %v, want invalid_request on checkpointId", name, err)
		}
	}
	for _, c := range ownerContainers(t, cli, h) {
		waitRemoved(t, cli, c.ID, time.Minute)
	}
}

// A workspace holding read-only directories (a Go module cache; chmod -R
// a-w), nested, with files, restores byte-identical with their modes.
// busybox tar, run as the workspace's owner, created each directory
// read-only when it met its entry, before the files inside it, so the
// checkpoint was written and every restore of it failed.
func testCheckpointReadOnlyDirs(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	ex := provision(t, h, emptyReq(img, small()))
	sh(t, h, ex.ExecutionID, `cd /workspace && mkdir -p mod/pkg@v1/inner mod/pkg@v1/other own/sub open &&
echo top > mod/go.mod && echo b > mod/pkg@v1/b.go && chmod 444 mod/pkg@v1/b.go &&
head -c 70000 /dev/urandom > mod/pkg@v1/inner/blob && echo o > mod/pkg@v1/other/o && echo s > own/sub/s &&
chmod 711 open && chmod 555 mod/pkg@v1/inner mod/pkg@v1/other mod/pkg@v1 mod && chmod 500 own/sub && chmod 700 own`)
	before := tree(t, h, ex.ExecutionID, "")
	for _, want := range []string{"./mod directory 555", "./mod/pkg@v1 directory 555", "./mod/pkg@v1/inner directory 555", "./own/sub directory 500", "./open directory 711", "./mod/pkg@v1/b.go regular file 444"} {
		if !strings.Contains(before, want) {
			t.Fatalf("tree listing lacks %q:\n%s", want, before)
		}
	}
	cp, err := h.Checkpoint(testCtx(t, time.Minute), ex.ExecutionID, CheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Terminate(testCtx(t, time.Minute), ex.ExecutionID); err != nil {
		t.Fatal(err)
	}
	rex, err := h.Restore(testCtx(t, 2*time.Minute), RestoreRequest{CheckpointID: cp.CheckpointID})
	if err != nil {
		t.Fatalf("restore of a workspace with read-only directories: %v", err)
	}
	if after := tree(t, h, rex.ExecutionID, ""); after != before {
		t.Fatalf("restored tree differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := sh(t, h, rex.ExecutionID, `cd /workspace && for d in mod mod/pkg@v1/inner own/sub; do touch $d/new 2>/dev/null && echo "$d writable"; done; echo done`).Stdout; got != "done\n" {
		t.Fatalf("restored read-only directories accept new files: %q", got)
	}
}

// An image without chmod still restores read-only directories: every file
// comes back, and those directories stay writable by their owner.
func testImportReadOnlyDirsWithoutChmod(t *testing.T) {
	cli, _ := engine(t)
	busybox, err := os.ReadFile("/bin/busybox")
	testenv.RequirePeer(t, "busybox-static at /bin/busybox", err == nil)
	ref := importImage(t, cli, busybox, []string{"sh", "sleep", "tar"})
	h := newTestHost(t, cli, &Config{AllowUnpinnedImages: true})
	ex := provision(t, h, emptyReq(ref, small()))

	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	_ = tw.WriteHeader(&tar.Header{Name: "./ro/", Typeflag: tar.TypeDir, Mode: 0o555})
	_ = tw.WriteHeader(&tar.Header{Name: "./ro/sub/", Typeflag: tar.TypeDir, Mode: 0o555})
	_ = tw.WriteHeader(&tar.Header{Name: "./ro/sub/f", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2})
	_, _ = tw.Write([]byte("f\n"))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	err = h.ws.Import(testCtx(t, time.Minute), ex.ContainerID, userOfExec(t, h, ex.ExecutionID), &in, 1<<20)
	if !errors.Is(err, errNoChmod) {
		t.Fatalf("import without chmod: %v, want errNoChmod", err)
	}
	var out bytes.Buffer
	if err := h.ws.Export(testCtx(t, time.Minute), ex.ContainerID, userOfExec(t, h, ex.ExecutionID), &out, 1<<20); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	tr := tar.NewReader(&out)
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		b, _ := io.ReadAll(tr)
		if hdr.Name == "./" {
			continue // the tmpfs's own mode
		}
		got[hdr.Name] = fmt.Sprintf("%o %q", hdr.Mode&0o777, b)
	}
	want := map[string]string{"./ro/": `755 ""`, "./ro/sub/": `755 ""`, "./ro/sub/f": `644 "f\n"`}
	if !maps.Equal(got, want) {
		t.Fatalf("workspace after import: %v, want %v", got, want)
	}
}

// A checkpoint whose files a restore cannot hold is refused, naming why:
// busybox tar stores a sparse file in full, so a workspace using 3 of its
// 8 MiB with a 6 MiB sparse file made a 9 MiB checkpoint, stored, that
// every restore refused ("does not fit in resources.diskBytes"), and a
// restore takes no resources to ask for more. Without the sparse file
// the same workspace checkpoints and restores.
func testCheckpointSparse(t *testing.T) {
	cli, img := engine(t)
	dir := t.TempDir()
	h := newTestHost(t, cli, &Config{CheckpointDir: dir})
	ex := provision(t, h, emptyReq(img, small()))
	sh(t, h, ex.ExecutionID, `cd /workspace && truncate -s 6M sparse && head -c 3145728 /dev/urandom > data`)
	_, err := h.Checkpoint(testCtx(t, time.Minute), ex.ExecutionID, CheckpointRequest{})
	var e *Error
	if !asError(err, &e) || e.Code != CodeConflict || !strings.Contains(e.Message, "sparse files are stored in full") || !strings.Contains(e.Message, `"./sparse"`) {
		t.Fatalf("checkpoint of a workspace with a sparse file: %v, want a conflict naming sparse files and ./sparse", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("a refused checkpoint left %v", left)
	}
	sh(t, h, ex.ExecutionID, `cd /workspace && rm sparse && head -c 4194304 /dev/urandom > more`)
	before := tree(t, h, ex.ExecutionID, "")
	cp, err := h.Checkpoint(testCtx(t, time.Minute), ex.ExecutionID, CheckpointRequest{})
	if err != nil {
		t.Fatalf("checkpoint of 7 MiB of files in 8: %v", err)
	}
	rex, err := h.Restore(testCtx(t, 2*time.Minute), RestoreRequest{CheckpointID: cp.CheckpointID})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if after := tree(t, h, rex.ExecutionID, ""); after != before {
		t.Fatalf("restored tree differs.\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// failingStore fails checkpoints the way a full or read-only checkpoint
// directory does.
type failingStore struct {
	CheckpointStore
	create error // from Create
	write  error // from the writer's first Write
}

type failingWriter struct {
	CheckpointWriter
	err error
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	return w.CheckpointWriter.Write(p)
}

func (s *failingStore) Create(ctx context.Context, id string) (CheckpointWriter, error) {
	if s.create != nil {
		return nil, s.create
	}
	w, err := s.CheckpointStore.Create(ctx, id)
	if err != nil {
		return nil, err
	}
	return &failingWriter{CheckpointWriter: w, err: s.write}, nil
}

// Checkpoint failures that are not the engine's name what failed and the
// fix, and leave the execution usable; all were 502 engine_error "the
// container engine failed": a file tar cannot read, an archive over the
// limit (many small files), the checkpoint storage full or read-only.
// A checkpoint tar with a corrupted header is "does not match its
// manifest", as a corrupted file content already was.
func testCheckpointFailuresNamed(t *testing.T) {
	cli, img := engine(t)
	local, err := NewLocalStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := &failingStore{CheckpointStore: local}
	h := newTestHost(t, cli, &Config{Store: store})
	ex := provision(t, h, emptyReq(img, small()))
	checkpoint := func(what, code string, says ...string) {
		t.Helper()
		_, err := h.Checkpoint(testCtx(t, time.Minute), ex.ExecutionID, CheckpointRequest{})
		var e *Error
		if !asError(err, &e) || e.Code != code {
			t.Fatalf("%s: %v, want %s", what, err, code)
		}
		t.Logf("%s: %s: %s", what, e.Code, e.Message)
		for _, s := range says {
			if !strings.Contains(e.Message, s) {
				t.Errorf("%s: message %q does not say %q", what, e.Message, s)
			}
		}
		if got := sh(t, h, ex.ExecutionID, "echo alive").Stdout; got != "alive\n" {
			t.Fatalf("%s: the execution after: %q", what, got)
		}
		if left, _ := os.ReadDir(local.Dir); len(left) != 0 {
			t.Fatalf("%s: left %v", what, left)
		}
	}

	sh(t, h, ex.ExecutionID, `cd /workspace && echo m > m && chmod 0 m`)
	checkpoint("an unreadable file", CodeConflict, "can't open './m': Permission denied", "chmod -R u+rX")
	sh(t, h, ex.ExecutionID, `cd /workspace && chmod 600 m && mkdir small && cd small && seq 1 20000 | sed s/^/f/ | xargs touch`)
	checkpoint("20000 empty files", CodeConflict, "512-byte tar header", "remove files")
	sh(t, h, ex.ExecutionID, `rm -r /workspace/small`)

	// A tree deeper than a path may be (4.8 KB), made by moving one deep
	// tree into another: the hint said chmod, which cannot help, and the
	// message and its error each held tar's 4 KB line.
	deep := `d=$(printf "%0200d" 0); p=$d; for i in $(seq 11); do p=$p/$d; done; `
	sh(t, h, ex.ExecutionID, deep+`mkdir -p /workspace/x/$p /workspace/y/$p && echo f > /workspace/y/$p/f && mv /workspace/y /workspace/x/$p/`)
	checkpoint("a path too long", CodeConflict, "File name too long", "shorten it", "or remove it")
	_, err = h.Checkpoint(testCtx(t, time.Minute), ex.ExecutionID, CheckpointRequest{})
	if e := (*Error)(nil); asError(err, &e) && (strings.Contains(e.Message, "chmod") || len(e.Message) > 1024 || len(err.Error()) > 2048) {
		t.Errorf("a path too long: a message of %d bytes, an error of %d, or chmod said: %q", len(e.Message), len(err.Error()), e.Message)
	}
	sh(t, h, ex.ExecutionID, deep+`mv /workspace/x/$p/y /workspace/ && rm -r /workspace/x /workspace/y`)

	store.create = &fs.PathError{Op: "open", Path: local.Dir + "/x.tar.1.partial", Err: syscall.EROFS}
	checkpoint("a read-only store", CodeStorageUnavailable, "checkpoint storage is on a read-only file system")
	store.create, store.write = nil, &fs.PathError{Op: "write", Path: local.Dir + "/x.tar.1.partial", Err: syscall.ENOSPC}
	checkpoint("a full store", CodeStorageUnavailable, "checkpoint storage is full")
	store.write = nil

	// Big enough that tar's stdin is not drained when tar gives up.
	sh(t, h, ex.ExecutionID, `head -c 4194304 /dev/urandom > /workspace/zbig`)
	cp, err := h.Checkpoint(testCtx(t, time.Minute), ex.ExecutionID, CheckpointRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// A byte of the second header's name: tar fails on its checksum
	// before the end of the archive.
	tarPath := filepath.Join(local.Dir, cp.CheckpointID+".tar")
	data, err := os.ReadFile(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	data[tarBlock+3] ^= 0x20
	if err := os.WriteFile(tarPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = h.Restore(testCtx(t, 2*time.Minute), RestoreRequest{CheckpointID: cp.CheckpointID})
	var e *Error
	if !asError(err, &e) || e.Code != CodeInvalidRequest || e.Field != "checkpointId" || e.Message != errChecksum.Error() {
		t.Fatalf("restore of a checkpoint with a corrupted header: %v, want invalid_request %q", err, errChecksum)
	}
}
