package dockerhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/internal/textcut"
)

var errTarTooLarge = errors.New("workspace tar exceeds the disk limit")

// Workspace moves trees in and out of an execution's /workspace: git
// archives and checkpoint tars, always through tar exec'd in the container
// over the daemon (the archive API cannot see tmpfs contents, moby#22020),
// and as the execution's non-root user, so files get its ownership.
type Workspace struct {
	runner *ProcessRunner
	// exportIdle is how long Export waits on tar writing nothing;
	// 0 means defaultExportIdle. Tests shorten it.
	exportIdle time.Duration
}

// defaultExportIdle is how long a checkpoint's tar may write nothing
// before Export gives up on it. The workspace is a tmpfs, and tar writes a
// header for every entry and the data of every file as it reads it, so a
// tar that works writes every few milliseconds, however slow its CPU
// share: a minute of nothing is a tar held. Sandbox code, which runs on
// during a checkpoint as tar's own user, holds it for good by swapping a
// file for a FIFO between tar's lstat and its open (busybox tar opens a
// file it found regular without O_NONBLOCK, and a FIFO's open waits for a
// writer), or by stopping it (kill -STOP).
const defaultExportIdle = time.Minute

// errExportStalled is Export giving up on a tar that wrote nothing for
// its exportIdle.
type errExportStalled struct{ idle time.Duration }

func (e *errExportStalled) Error() string {
	return fmt.Sprintf("tar wrote nothing of the workspace for %v", e.idle)
}

// Tool is a file every container finds in ToolsDir, owned by root.
type Tool struct {
	Name string      // a plain file name
	Mode fs.FileMode // permission bits, e.g. 0o755
	Data []byte
}

// ImportGit unpacks commit (a full commit id, from resolveGit) of the
// local repository repo into the workspace: git archive, no worktree, no
// .git, never a bind mount.
func (w *Workspace) ImportGit(ctx context.Context, containerID, user, repo, commit string, diskBytes int64) error {
	if !sha1or256RE.MatchString(commit) {
		// Never user text where git archive could take it for an option.
		return fmt.Errorf("git archive: %q is not a resolved commit id", commit)
	}
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "archive", "--format=tar", commit)
	var gitErr lineCutter
	cmd.Stderr = &gitErr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("git archive: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("git archive: %w", err)
	}
	err = w.Import(ctx, containerID, user, out, maxTarBytes(diskBytes))
	if err != nil {
		_ = cmd.Process.Kill()
	}
	werr := cmd.Wait()
	gitMsg := strings.TrimSpace(gitErr.String())
	var ue *unpackError
	switch {
	case errors.Is(err, errTarTooLarge):
		return invalid("workspace.revision", "the revision's files do not fit in resources.diskBytes")
	case werr != nil && gitMsg != "" && ctx.Err() == nil:
		// git failed of itself (one Import killed says nothing): tar's
		// error, "short read", is only the echo of its cut output, and
		// was answered as the engine's failure.
		if e := notOwnedError(gitMsg); e != nil {
			// Its owner changed since rev-parse.
			return e
		}
		if strings.Contains(gitMsg, "current working directory is untracked") {
			// rev-parse found the repository in a parent directory.
			return invalid("workspace.repositoryPath", "is a directory the git repository around it does not track: name the repository's top directory")
		}
		// The revision resolved, but git cannot read all it holds (an
		// object missing or damaged): the repository's fault, answered
		// 502, the engine's.
		return &Error{Code: CodeInvalidRequest, Field: "workspace.repositoryPath", Err: fmt.Errorf("git archive: %w: %s", werr, gitMsg),
			Message: "git archive of revision " + commit + " failed in the repository (" + toolWords(gitMsg) + "): objects it needs are missing or damaged; " +
				"git fsck in the repository says which: repair it, or name another repository or revision"}
	case errors.As(err, &ue):
		// tar refused what the revision holds: a path past what a path
		// may be, or an entry through a symbolic link (git's plumbing
		// makes such trees, which git checkout refuses). It answered 502.
		fix := "its tree holds what a workspace cannot (an entry through a symbolic link, a path too long): import another revision"
		if strings.Contains(ue.out, "too long") {
			fix = "a path in it is longer than the file system takes (4096 bytes a path, 255 a name): shorten it in the repository, or import another revision"
		}
		return &Error{Code: CodeInvalidRequest, Field: "workspace.revision", Err: err,
			Message: "the revision's files do not unpack into a workspace (" + toolWords(ue.out) + "): " + fix}
	case err != nil:
		return err
	case werr != nil:
		return fmt.Errorf("git archive: %w: %s", werr, gitMsg)
	}
	return nil
}

// resolveGit turns rev into a full commit id, so git archive never sees
// user text where an option could hide, and refuses what git archive
// would fail on in repo: no repository, one git will not open for its
// owner, no such commit, a directory the commit does not hold.
func resolveGit(ctx context.Context, repo, rev string) (string, error) {
	commit, prefix, err := resolveCommit(ctx, repo, rev)
	if err != nil || prefix == "" {
		return commit, err
	}
	// repo is a directory under the repository's top: git archive takes
	// the commit's tree there, and fails when the commit has none.
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "cat-file", "-t", commit+":"+prefix)
	var stderr bytes.Buffer
	cmd.Stderr = &capWriter{w: &stderr, left: 4 << 10}
	out, err := cmd.Output()
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if e := notOwnedError(stderr.String()); err != nil && e != nil {
		// Its owner changed since rev-parse.
		return "", e
	}
	if err != nil || strings.TrimSpace(string(out)) != "tree" {
		return "", invalid("workspace.repositoryPath", "is a directory the git repository around it does not track: name the repository's top directory")
	}
	return commit, nil
}

// resolveCommit is rev's full commit id in repo, and the path of repo
// under the repository's top ("" at the top, in .git or a bare one).
func resolveCommit(ctx context.Context, repo, rev string) (commit, prefix string, _ error) {
	// One git: --show-prefix prints its line before --verify's.
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "rev-parse", "--show-prefix", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	var stderr bytes.Buffer
	cmd.Stderr = &capWriter{w: &stderr, left: 4 << 10}
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		msg := strings.TrimSpace(stderr.String())
		if e := notOwnedError(msg); e != nil {
			return "", "", e
		}
		if strings.Contains(msg, "not a git repository") || strings.Contains(msg, "cannot change to") {
			return "", "", invalid("workspace.repositoryPath", "is not a git repository")
		}
		return "", "", invalid("workspace.revision", "%q is not a commit in the repository", rev)
	}
	// The commit is the last line; the prefix, git's raw path (a
	// directory's name may hold a newline), all before it.
	rest, ok := strings.CutSuffix(string(out), "\n")
	i := strings.LastIndexByte(rest, '\n')
	if !ok || i < 0 || !sha1or256RE.MatchString(rest[i+1:]) {
		return "", "", fmt.Errorf("git rev-parse: unexpected output %q", textcut.Cut(string(out), 256))
	}
	return rest[i+1:], rest[:i], nil
}

// dubiousRE finds the repository git names when it refuses one another
// user owns (git 2.35.2 on, its safe.directory check).
var dubiousRE = regexp.MustCompile(`(?m)detected dubious ownership in repository at '(.+)'$`)

// notOwnedError is the refusal of a repository when gitMsg says git
// would not open it for its owner, else nil. It answered
// `workspace.revision: "HEAD" is not a commit in the repository`, a
// revision that is there.
// The gateway never passes safe.directory itself: git archive runs the
// filter drivers the repository's config names (filter.*.smudge), as
// the gateway's user, which is what git's check guards against.
func notOwnedError(gitMsg string) *Error {
	m := dubiousRE.FindStringSubmatch(gitMsg)
	if m == nil {
		return nil
	}
	at := m[1] // the repository git found, maybe above repo or its .git
	me := os.Geteuid()
	owner, who := "another user than the gateway's", "its owner"
	for _, p := range []string{at, path.Join(at, ".git")} {
		if uid, ok := fileOwner(p); ok && uid != me {
			owner = "uid " + userWords(uid)
			who = owner
			break
		}
	}
	return &Error{Code: CodeInvalidRequest, Field: "workspace.repositoryPath", Err: errors.New(toolWords(gitMsg)),
		Message: fmt.Sprintf("git refuses the repository at %s, as it is owned by %s and the gateway runs as uid %s: "+
			"make the gateway's user own it (chown -R %d %s), or, only if %s is trusted (git archive runs the filters the repository's config names, as the gateway's user), "+
			"add it to the gateway user's git config: git config --global --add safe.directory %s",
			at, owner, userWords(me), me, shellWord(at), who, shellWord(at))}
}

// shellWord quotes s for a shell when it needs it, so a command in a
// message can be pasted as it is.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-+,:@=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// fileOwner is the uid that owns p (not following a last symbolic link).
func fileOwner(p string) (int, bool) {
	fi, err := os.Lstat(p)
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// userWords is uid, with its user's name when the system knows one:
// "1000 (alice)".
func userWords(uid int) string {
	s := strconv.Itoa(uid)
	if u, err := user.LookupId(s); err == nil && u.Username != "" {
		s += " (" + u.Username + ")"
	}
	return s
}

// Import unpacks the tar src into the workspace. src is read through a
// bound of limit bytes; a source read error (a failed checksum) fails the
// import before tar sees a clean end of input.
//
// Directories their owner cannot write into (a Go module cache, a chmod
// -R a-w) are unpacked writable and made read-only again afterwards:
// busybox tar run as that owner without capabilities creates a directory
// with its mode when it meets the directory's entry, before the entries
// inside it, and then cannot create them. Putting the directory's entry
// after its contents does not help: busybox tar applies no mode to a
// directory that exists (as a non-root user it never calls chmod; a mode
// comes only from mkdir and open, under the umask). So the modes are put
// back with chmod; an image without chmod gets errNoChmod, the contents
// complete and those directories left writable by their owner.
func (w *Workspace) Import(ctx context.Context, containerID, user string, src io.Reader, limit int64) error {
	dr := newDirModeReader(&boundedReader{r: src, left: limit})
	if err := w.untar(ctx, containerID, user, WorkspaceDir, dr); err != nil {
		return err
	}
	return w.chmodDirs(ctx, containerID, user, dr.w.dirs)
}

// errNoChmod: the image has no chmod to make read-only directories
// read-only again after an import.
var errNoChmod = errors.New("the image has no chmod: read-only directories were restored writable by their owner")

// noCommand is an exec the runtime could not start for want of its
// executable; a command that ran and failed (chmod: ./x: No such file or
// directory) is not.
func noCommand(err error) bool {
	var xe *execExit
	return errors.As(err, &xe) && (xe.code == 126 || xe.code == 127) && missingExecutable(err)
}

// maxChmodArgBytes bounds the names one chmod gets, well under the
// kernel's argument limits (ARG_MAX, 128 KiB for one argument).
const maxChmodArgBytes = 64 << 10

// chmodDirs gives dirs their modes, the deepest first: a directory
// without u+x would otherwise keep chmod from reaching those below it.
func (w *Workspace) chmodDirs(ctx context.Context, containerID, user string, dirs []dirMode) error {
	slices.SortStableFunc(dirs, func(a, b dirMode) int {
		return strings.Count(b.name, "/") - strings.Count(a.name, "/")
	})
	for i := 0; i < len(dirs); {
		mode := dirs[i].mode
		argv := []string{"chmod", strconv.FormatInt(mode, 8), "--"}
		for n := 0; i < len(dirs) && dirs[i].mode == mode && n < maxChmodArgBytes; i++ {
			argv = append(argv, dirs[i].name)
			n += len(dirs[i].name) + 1
		}
		var out bytes.Buffer
		cw := &capWriter{w: &out, left: 4 << 10}
		code, err := w.runner.run(ctx, process{
			containerID: containerID,
			user:        user,
			argv:        argv,
			dir:         WorkspaceDir,
			env:         ownEnv,
			stdout:      cw,
			stderr:      cw,
		})
		if err == nil && code != 0 {
			err = &execExit{argv0: "chmod", code: code, out: strings.TrimSpace(out.String())}
		}
		switch {
		case err == nil:
		case ctx.Err() == nil && noCommand(err):
			return fmt.Errorf("%w (%d directories): %w", errNoChmod, len(dirs), err)
		default:
			return fmt.Errorf("restore the modes of read-only directories: %w", err)
		}
	}
	return nil
}

// Export writes the workspace as a tar to dst, failing when it grows past
// limit bytes.
func (w *Workspace) Export(ctx context.Context, containerID, user string, dst io.Writer, limit int64) error {
	idle := w.exportIdle
	if idle == 0 {
		idle = defaultExportIdle
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	out := newIdleWriter(&boundedWriter{w: dst, left: limit}, idle, func() { cancel(&errExportStalled{idle: idle}) })
	defer out.stop()
	var stderr lineCutter
	code, err := w.runner.run(ctx, process{
		containerID: containerID,
		user:        user,
		argv:        []string{"tar", "-C", WorkspaceDir, "-cf", "-", "."},
		dir:         "/",
		env:         ownEnv,
		stdout:      out,
		stderr:      &stderr,
	})
	if err != nil {
		return fmt.Errorf("export workspace: %w", err)
	}
	if code != 0 {
		return fmt.Errorf("export workspace: %w", &execExit{argv0: "tar", code: code, out: strings.TrimSpace(stderr.String())})
	}
	return nil
}

func (w *Workspace) untar(ctx context.Context, containerID, user, dir string, src io.Reader) error {
	var out lineCutter
	cw := &out
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
		if code != 126 && code != 127 {
			return fmt.Errorf("unpack into %s: %w", dir, &unpackError{code: code, out: msg})
		}
		return fmt.Errorf("unpack into %s: tar exited %d: %s", dir, code, msg)
	}
	return nil
}

// unpackError is tar refusing what an archive holds (it ran, and exited
// non-zero with room left): its words name the entry.
type unpackError struct {
	code int
	out  string
}

func (e *unpackError) Error() string {
	return fmt.Sprintf("tar exited %d: %s", e.code, toolWords(e.out))
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

// idleWriter calls stalled when no Write has begun for idle since the
// last one ended (or since it was made): the time its writer waits for
// what comes next. Its own Writes, however slow (a store on a slow disk),
// do not count.
type idleWriter struct {
	w     io.Writer
	idle  time.Duration
	timer *time.Timer
}

func newIdleWriter(w io.Writer, idle time.Duration, stalled func()) *idleWriter {
	return &idleWriter{w: w, idle: idle, timer: time.AfterFunc(idle, stalled)}
}

func (i *idleWriter) Write(p []byte) (int, error) {
	i.timer.Stop()
	n, err := i.w.Write(p)
	if err == nil {
		i.timer.Reset(i.idle)
	}
	return n, err
}

// stop ends the watch; call it once the writes are over.
func (i *idleWriter) stop() { i.timer.Stop() }

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
