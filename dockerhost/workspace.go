package dockerhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"path"
	"strings"
)

var errTarTooLarge = errors.New("workspace tar exceeds the disk limit")

// Workspace moves trees in and out of an execution's /workspace: git
// archives and checkpoint tars, always through tar exec'd in the container
// over the daemon (the archive API cannot see tmpfs contents, moby#22020),
// and as the execution's non-root user, so files get its ownership.
type Workspace struct {
	runner *ProcessRunner
	user   string
}

// Tool is a file every container finds in ToolsDir, owned by root.
type Tool struct {
	Name string      // a plain file name
	Mode fs.FileMode // permission bits, e.g. 0o755
	Data []byte
}

// ImportGit unpacks revision rev of the local repository repo into the
// workspace: git archive, no worktree, no .git, never a bind mount.
func (w *Workspace) ImportGit(ctx context.Context, containerID, repo, rev string, diskBytes int64) error {
	commit, err := resolveCommit(ctx, repo, rev)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "archive", "--format=tar", commit)
	var gitErr bytes.Buffer
	cmd.Stderr = &capWriter{w: &gitErr, left: 4 << 10}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("git archive: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("git archive: %w", err)
	}
	err = w.Import(ctx, containerID, out, maxTarBytes(diskBytes))
	if err != nil {
		_ = cmd.Process.Kill()
	}
	werr := cmd.Wait()
	switch {
	case errors.Is(err, errTarTooLarge):
		return invalid("workspace.revision", "the revision's files do not fit in resources.diskBytes")
	case err != nil:
		return err
	case werr != nil:
		return fmt.Errorf("git archive: %w: %s", werr, strings.TrimSpace(gitErr.String()))
	}
	return nil
}

// resolveCommit turns rev into a full commit id, so git archive never sees
// user text where an option could hide.
func resolveCommit(ctx context.Context, repo, rev string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	var stderr bytes.Buffer
	cmd.Stderr = &capWriter{w: &stderr, left: 4 << 10}
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "not a git repository") || strings.Contains(msg, "cannot change to") {
			return "", invalid("workspace.repositoryPath", "is not a git repository")
		}
		return "", invalid("workspace.revision", "%q is not a commit in the repository", rev)
	}
	commit := strings.TrimSpace(string(out))
	if !sha1or256RE.MatchString(commit) {
		return "", fmt.Errorf("git rev-parse: unexpected output %q", commit)
	}
	return commit, nil
}

// Import unpacks the tar src into the workspace. src is read through a
// bound of limit bytes; a source read error (a failed checksum) fails the
// import before tar sees a clean end of input.
func (w *Workspace) Import(ctx context.Context, containerID string, src io.Reader, limit int64) error {
	return w.untar(ctx, containerID, w.user, WorkspaceDir, &boundedReader{r: src, left: limit})
}

// Export writes the workspace as a tar to dst, failing when it grows past
// limit bytes.
func (w *Workspace) Export(ctx context.Context, containerID string, dst io.Writer, limit int64) error {
	var stderr bytes.Buffer
	code, err := w.runner.run(ctx, process{
		containerID: containerID,
		user:        w.user,
		argv:        []string{"tar", "-C", WorkspaceDir, "-cf", "-", "."},
		dir:         "/",
		env:         ownEnv,
		stdout:      &boundedWriter{w: dst, left: limit},
		stderr:      &capWriter{w: &stderr, left: 4 << 10},
	})
	if err != nil {
		return fmt.Errorf("export workspace: %w", err)
	}
	if code != 0 {
		return fmt.Errorf("export workspace: tar exited %d: %s", code, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func (w *Workspace) untar(ctx context.Context, containerID, user, dir string, src io.Reader) error {
	var out bytes.Buffer
	cw := &capWriter{w: &out, left: 4 << 10}
	code, err := w.runner.run(ctx, process{
		containerID: containerID,
		user:        user,
		argv:        []string{"tar", "-C", dir, "-xf", "-"},
		dir:         "/",
		env:         ownEnv,
		stdin:       src,
		stdout:      cw,
		stderr:      cw,
	})
	if err != nil {
		return fmt.Errorf("unpack into %s: %w", dir, err)
	}
	if code != 0 {
		msg := strings.TrimSpace(out.String())
		if strings.Contains(msg, "No space left") {
			return fmt.Errorf("unpack into %s: %w: %s", dir, errTarTooLarge, msg)
		}
		return fmt.Errorf("unpack into %s: tar exited %d: %s", dir, code, msg)
	}
	return nil
}

// validToolName refuses anything but a plain file name.
func validToolName(name string) bool {
	return name != "" && name != "." && name != ".." && path.Base(name) == name && !strings.ContainsAny(name, "/\x00")
}

// boundedReader fails with errTarTooLarge once more than left bytes came.
type boundedReader struct {
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errTarTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, errTarTooLarge
	}
	return n, err
}

// boundedWriter fails with errTarTooLarge past left bytes.
type boundedWriter struct {
	w    io.Writer
	left int64
}

func (b *boundedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > b.left {
		return 0, errTarTooLarge
	}
	b.left -= int64(len(p))
	return b.w.Write(p)
}

// capWriter keeps the first left bytes and drops the rest without failing:
// it holds diagnostics, which must never stall the command.
type capWriter struct {
	w    io.Writer
	left int
}

func (c *capWriter) Write(p []byte) (int, error) {
	if c.left > 0 {
		n := min(len(p), c.left)
		_, _ = c.w.Write(p[:n])
		c.left -= n
	}
	return len(p), nil
}
