package hostgate

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/hostgate/hostgate/internal/shell"
)

// ErrTransferLimit is the error of an Upload or Download whose tree holds
// more than TransferOptions allow.
var ErrTransferLimit = errors.New("hostgate: tree transfer: more than TransferOptions allow")

// The limits of a tree transfer when TransferOptions leaves them 0.
const (
	DefaultTransferMaxBytes = 1 << 30 // 1 GiB of file contents
	DefaultTransferMaxFiles = 100_000 // entries: files, directories, links
)

// TransferOptions bound an Upload or Download; nil means the defaults.
type TransferOptions struct {
	// MaxBytes bounds the bytes of the files together (on Download, with
	// any data the host's archive gives an entry it skips); 0 means
	// DefaultTransferMaxBytes.
	MaxBytes int64
	// MaxFiles bounds the entries (files, directories and links, and on
	// Download the other kinds it skips, which a host sends all the
	// same); 0 means DefaultTransferMaxFiles.
	MaxFiles int
	// NoTar moves the tree over the host's filesystem (Host.FS, SFTP on
	// an SSH host), file by file, even when the host has tar.
	NoTar bool
}

func (o *TransferOptions) limits() (int64, int) {
	var b int64
	var n int
	if o != nil {
		b, n = o.MaxBytes, o.MaxFiles
	}
	if b <= 0 {
		b = DefaultTransferMaxBytes
	}
	if n <= 0 {
		n = DefaultTransferMaxFiles
	}
	return b, n
}

// transferConcurrency is how many files the filesystem way moves at once:
// the audit31 audit measured 16 at a time 4-5x faster than one by one.
const transferConcurrency = 16

// tarMissing is the exit status of the transfer's shell when the host
// has no tar (as a shell's for a command not found).
const tarMissing = 127

// Upload copies the tree src (its regular files, directories and symbolic
// links; other kinds are skipped) into dir on h, creating dir and its
// parents as needed and replacing files of the same names (a symbolic
// link at one is replaced, not followed). dir is a host
// path; a relative one is relative to the home directory.
//
// It sends the tree as one tar stream to tar on the host (200 files of
// 4 KiB to a sandbox through the gateway in 0.068x the time of a loop of
// SFTP Creates), and falls back to the host's filesystem (Host.FS), 16
// files at a time (0.30x that loop's time), when the host has no tar. Names are src's, which
// io/fs keeps relative and without "..". Permission bits (a directory's
// with its owner's rwx added) and modification times (to the second; a
// zero one, as embed.FS gives, as 1970-01-01) go with the files and
// directories, ownership does not. The filesystem way (NoTar, or a host
// without tar) sets times where the provider is a TimeSetter (SFTP's,
// ExecProvider's), one request more per file, directory and link; there
// a file the host will not let this user set the time of (another
// user's, written over), or a time the provider cannot carry (SFTP's:
// before 1970 or after 2106), keeps the time it was written. A symbolic
// link's own time goes with it where the host sets one: GNU's tar does,
// and the filesystem way does through Lchtimes (an SFTP server with
// lsetstat@openssh.com, as OpenSSH's and sshlayer's, or ExecProvider's
// touch -h); busybox's tar, or an SFTP server without it, leaves the
// link the time it is made. A tree over opts' limits fails with
// ErrTransferLimit; what was sent by then stays. A tree the host's disk
// has no room for fails with an error that errors.Is matches against
// syscall.ENOSPC, either way: GNU's tar names no errno for a write the
// full disk cut short, so there the host's df is asked (a host without
// one keeps tar's words alone). Where the host tells how
// its tar exited before the session ends (an SSH host: OpenSSH's sshd
// keeps a session open while a process left in the background holds its
// output), the session's end is waited for no longer than 5 s after;
// the session is then closed, and the exit told is tar's word.
func Upload(ctx context.Context, h *Host, src fs.FS, dir string, opts *TransferOptions) error {
	err := upload(ctx, h, src, dir, opts)
	if err != nil {
		err = h.named(fmt.Errorf("hostgate: upload to %s: %w", dir, err))
	}
	return err
}

// Download copies the tree at dir on h (its regular files, directories
// and symbolic links; other kinds are skipped) into the local directory
// dst, creating it as needed and replacing files of the same names.
// dir must be a directory: a missing one fails with fs.ErrNotExist, a file
// with syscall.ENOTDIR (read one file with Host.FS).
//
// It reads the tree as one tar stream from tar on the host, falling back
// to the host's filesystem (Host.FS), 16 files at a time, when the host
// has no tar. What the host sends is not trusted: every name is checked
// to be relative and without "..", a symbolic link whose target would
// leave dst is refused, and all writes go through an os.Root at dst, so
// none lands outside it. A refused entry fails the Download; files
// written by then stay. Permission bits go with the files (a
// directory's with its owner's rwx added), ownership does not.
// Modification times go with the files, directories and (on Unix)
// symbolic links both ways, as GNU tar, scp -p and sftp's get -p keep
// them (to the second over SFTP and most tars; a directory's set once
// all in it is written), so that make and rsync's quick check see an
// unchanged tree as unchanged; dst itself keeps its own, and a file
// this user may write but not set the time of (another user's, written
// over) keeps the time it was written. A tree over opts' limits fails
// with ErrTransferLimit. The host's tar is waited for no longer than 5 s
// once its archive has ended: a session that a process left in the
// background keeps open (a host's shell startup files may start one) is
// closed then, and where the host had not said by then that tar
// succeeded, the Download fails saying so, the tree written.
func Download(ctx context.Context, h *Host, dir, dst string, opts *TransferOptions) error {
	err := download(ctx, h, dir, dst, opts)
	if err != nil {
		err = h.named(fmt.Errorf("hostgate: download of %s: %w", dir, fileNotTree(ctx, h, dir, err)))
	}
	return err
}

// fileNotTree is err, or, when dir is a regular file, the error that says
// so and what reads one: "open …: not a directory" alone left a program
// that downloaded one file wondering. It stays syscall.ENOTDIR.
func fileNotTree(ctx context.Context, h *Host, dir string, err error) error {
	if !errors.Is(err, syscall.ENOTDIR) {
		return err
	}
	p, perr := h.fsProvider(ctx)
	if perr != nil {
		return err
	}
	// A directory on the way that is a file fails this Stat too.
	if fi, serr := p.Stat(ctx, dir); serr != nil || !fi.Mode().IsRegular() {
		return err
	}
	return &fs.PathError{Op: "open", Path: dir, Err: fmt.Errorf("%w (it is a file: Download copies a directory's tree; read one file with Host.FS's Open, or syncfs's ReadFile)", syscall.ENOTDIR)}
}

// remoteTar starts script (a shell script given dir as $1) on the host,
// which exits with tarMissing at once when the host has no tar (as the
// host does for no sh).
func remoteTar(ctx context.Context, h *Host, script, dir string) (Process, error) {
	argv := []string{"sh", "-c", "command -v tar >/dev/null 2>&1 || exit " + fmt.Sprint(tarMissing) + "; " + script, "sh", shell.CdOperand(dir)}
	p, _, err := h.spawn(ctx, argv, SpawnOptions{})
	return p, err
}

// headBuffer keeps the first 4 KiB written to it: a command's stderr,
// for its error, written by one goroutine and read once it has ended, or
// while it goes on (a download's tar whose output stayed open).
type headBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *headBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 4096 - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (b *headBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(b.buf.String())
}

// tarFailed is the error of a host's tar that did not succeed.
func tarFailed(werr error, stderr *headBuffer) error {
	if msg := stderr.String(); msg != "" {
		return fmt.Errorf("tar on the host: %w: %s", werr, msg)
	}
	return fmt.Errorf("tar on the host: %w", werr)
}

func upload(ctx context.Context, h *Host, src fs.FS, dir string, opts *TransferOptions) error {
	if opts == nil || !opts.NoTar {
		sent, err := uploadTar(ctx, h, src, dir, opts)
		if sent || err != nil {
			return err
		}
	}
	return uploadFS(ctx, h, src, dir, opts)
}

// uploadTar sends src to tar on the host; sent is false when the host has
// no tar.
func uploadTar(ctx context.Context, h *Host, src fs.FS, dir string, opts *TransferOptions) (sent bool, err error) {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// When mkdir fails, the nearest part of dir that is there says why, in
	// the exit statuses of ExecProvider's scripts: a file (ENOTDIR, as the
	// providers' Mkdir with parents says, the way without tar, and
	// os.MkdirAll; mkdir -p says EEXIST) or a directory this user may not
	// write in (fs.ErrPermission); else mkdir's words.
	p, err := remoteTar(ctx, h, `mkdir -p -- "$1" 2>/dev/null || {
  p=$1
  while [ ! -e "$p" ] && [ ! -L "$p" ]; do
    case $p in */*) p=${p%/*}; [ -n "$p" ] || p=/;; *) p=.;; esac
  done
  [ -d "$p" ] || exit 93
  [ -w "$p" ] && [ -x "$p" ] || exit 92
  mkdir -p -- "$1" || exit
}
cd -- "$1" && exec tar -x -o -f -`, dir)
	if err != nil {
		return false, err
	}
	var stderr headBuffer
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(&stderr, p.Stderr()) })
	wg.Go(func() { _, _ = io.Copy(io.Discard, p.Stdout()) })
	in := p.Stdin()
	tw := tar.NewWriter(hostWriter{in})
	var dirs []*tar.Header
	werr := walkTree(src, opts, func(name string, d fs.DirEntry, info fs.FileInfo, link string) error {
		hdr := &tar.Header{Name: name, Mode: int64(info.Mode().Perm()), ModTime: info.ModTime(), Format: tar.FormatGNU}
		switch {
		case d.IsDir():
			// The owner's rwx added: tar makes a directory as the
			// archive says before its files (busybox's, on a
			// read-only directory of fstest.MapFS's, then could not).
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, name+"/", hdr.Mode|0o700
			dirs = append(dirs, hdr)
		case link != "":
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, link
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := src.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
			return fmt.Errorf("%s: %w (did it change while being sent?)", name, err)
		}
		return nil
	})
	// The directories again, deepest first, once all in them is there:
	// busybox's tar sets a directory's time as its entry comes, and each
	// entry made in it after moved it (GNU's sets it at the end anyway,
	// and takes the repeat as a directory already there).
	for _, hdr := range slices.Backward(dirs) {
		if werr != nil {
			break
		}
		werr = tw.WriteHeader(hdr)
	}
	if werr == nil {
		werr = tw.Close()
	}
	if werr != nil && !isWriteToHost(werr) {
		// The tree's own error (or a limit): the host's tar must not
		// take a cut archive for a whole one.
		cancel()
		_ = p.Kill(SIGKILL)
		if exited, _ := waitCtx(parent, p); exited {
			wg.Wait()
		}
		return true, werr
	}
	_ = in.Close()
	// Not past ctx, as Exec (a host that stopped answering: waitCtx).
	// Nor long past tar's exit, where the host tells it before the
	// session's end (waitTold).
	exited, _, perr := waitTold(parent, p, nil)
	if !exited {
		if parent.Err() == nil {
			return true, &outputHeldError{done: "exited", stderr: stderr.String()}
		}
		return true, perr
	}
	wg.Wait()
	if ExitCode(perr) == tarMissing {
		return false, nil
	}
	if e, ok := exitErrnos[ExitCode(perr)]; ok {
		return true, &fs.PathError{Op: "mkdir", Path: dir, Err: e}
	}
	if perr != nil {
		return true, uploadTarFailed(parent, h, perr, &stderr, dir)
	}
	if werr != nil {
		return true, werr
	}
	return true, nil
}

// uploadTarFailed is the error of the host's tar that failed writing the
// tree into dir: ENOSPC where its words say so (busybox's 'write error:
// No space left on device', GNU's 'Cannot open: …'), which errors.Is
// matches as it does the way without tar's, the filesystem's write error.
// Only that errno: tar goes on past a file it could not write, so its
// words may name others for one file while the disk's being full is why
// the upload failed. GNU's tar names no errno for a write the disk cut
// short ('Wrote only 4608 of 10240 bytes': write(2) returned less, with
// no error), the usual end of a full disk: then the host's df says
// whether the room left is less than that write's rest.
func uploadTarFailed(ctx context.Context, h *Host, perr error, stderr *headBuffer, dir string) error {
	err := tarFailed(perr, stderr)
	msg := stderr.String()
	if strings.Contains(msg, "No space left on device") {
		return noSpace(err, dir)
	}
	m := wroteOnly.FindStringSubmatch(msg)
	if m == nil {
		return err
	}
	wrote, _ := strconv.ParseInt(m[1], 10, 64)
	of, _ := strconv.ParseInt(m[2], 10, 64)
	if free, ok := hostFreeBytes(ctx, h, dir); ok && free <= max(of-wrote, 0) {
		return noSpace(err, dir)
	}
	return err
}

// wroteOnly is GNU tar's report of a short write.
var wroteOnly = regexp.MustCompile(`Wrote only (\d+) of (\d+) bytes`)

// dfAvailable is a line of POSIX df -P's output: the numbers of blocks,
// used and available, and the capacity, between the filesystem's name
// and its mount point.
var dfAvailable = regexp.MustCompile(`\s(\d+)\s+(\d+)\s+(\d+)\s+\d+%\s`)

// hostFreeBytes asks the host's df (POSIX -P -k: GNU, busybox, BSD) the
// room this user has left on the filesystem holding dir; ok is false
// where it could not tell (no df, a host not answering within
// freeSpaceWait: the error then is tar's alone).
func hostFreeBytes(ctx context.Context, h *Host, dir string) (free int64, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, freeSpaceWait)
	defer cancel()
	res, err := h.exec(ctx, []string{"sh", "-c", `cd -- "$1" && exec df -P -k .`, "sh", shell.CdOperand(dir)}, ExecOptions{MaxOutput: 64 << 10})
	if err != nil || res.ExitCode != 0 {
		return 0, false
	}
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	m := dfAvailable.FindStringSubmatch(lines[len(lines)-1] + " ")
	if m == nil {
		return 0, false
	}
	kib, err := strconv.ParseInt(m[3], 10, 64)
	if err != nil || kib > math.MaxInt64>>10 {
		return 0, false
	}
	return kib << 10, true
}

// freeSpaceWait bounds the df that tells a full disk from tar's other
// failures: tar's error is known already, and a host slow to answer
// should not hold it past its own wait.
const freeSpaceWait = 10 * time.Second

// noSpace is err, a host's tar's failure to write into dir, matching
// ENOSPC and saying what to do.
func noSpace(err error, dir string) error {
	return fmt.Errorf("%w (%w: free space on the host's disk holding %s, or upload less)", err, syscall.ENOSPC, dir)
}

// hostWriteError marks a failed write of the archive to the host's tar,
// whose exit says more.
type hostWriteError struct{ error }

func (e hostWriteError) Unwrap() error { return e.error }

// hostWriter marks its writer's errors as hostWriteError.
type hostWriter struct{ w io.Writer }

func (h hostWriter) Write(p []byte) (int, error) {
	n, err := h.w.Write(p)
	if err != nil {
		err = hostWriteError{err}
	}
	return n, err
}

func isWriteToHost(err error) bool {
	var hw hostWriteError
	return errors.As(err, &hw)
}

// walkTree calls fn for each entry of src under its limits: regular
// files, directories and symbolic links (link is then the target), in
// lexical order, parents first, without ".".
func walkTree(src fs.FS, opts *TransferOptions, fn func(name string, d fs.DirEntry, info fs.FileInfo, link string) error) error {
	maxBytes, maxFiles := opts.limits()
	var bytes int64
	files := 0
	return fs.WalkDir(src, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		var link string
		switch t := d.Type(); {
		case t.IsDir(), t.IsRegular():
		case t&fs.ModeSymlink != 0:
			if link, err = fs.ReadLink(src, name); err != nil {
				return err
			}
		default:
			return nil // devices, pipes, sockets
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files++
		if t := d.Type(); t.IsRegular() {
			bytes += info.Size()
		}
		if files > maxFiles {
			return fmt.Errorf("%w: more than %d files", ErrTransferLimit, maxFiles)
		}
		if bytes > maxBytes {
			return fmt.Errorf("%w: more than %d bytes", ErrTransferLimit, maxBytes)
		}
		return fn(name, d, info, link)
	})
}

// uploadFS copies src file by file through the host's filesystem,
// transferConcurrency files at a time.
func uploadFS(ctx context.Context, h *Host, src fs.FS, dir string, opts *TransferOptions) error {
	p, err := h.fsProvider(ctx)
	if err != nil {
		return err
	}
	// A symbolic link on the host at a name of the tree is replaced, as
	// tar replaces it, not followed: a file written through it, or a
	// directory's files made in it, landed wherever it led, out of dir
	// or over another file of the tree (a link that became a file since
	// the last Upload). A directory this Upload made holds none, so its
	// files are not looked at first (fresh: the walk's alone).
	fresh := map[string]bool{}
	switch err := p.Mkdir(ctx, dir, 0o755, false); {
	case err == nil:
		fresh["."] = true
	case errors.Is(err, fs.ErrExist):
		// dir itself is the caller's, link or not, as tar's cd takes it.
	default:
		if err := p.Mkdir(ctx, dir, 0o755, true); err != nil {
			return err
		}
	}
	ts, _ := p.(TimeSetter)
	// A directory's time is set once all in it is there, as tar sets it,
	// since each entry made in it moves it.
	var dirTimes []entryTime
	parent := ctx
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(transferConcurrency)
	werr := walkTree(src, opts, func(name string, d fs.DirEntry, info fs.FileInfo, link string) error {
		if err := ctxErr(ctx); err != nil {
			return err // a file's copy failed: g.Wait has its error
		}
		to := path.Join(dir, name)
		switch {
		case d.IsDir():
			dirTimes = append(dirTimes, entryTime{to, info.ModTime()})
			// Parents come first: made before any file in them.
			perm := info.Mode().Perm() | 0o700
			err := p.Mkdir(ctx, to, perm, false)
			if errors.Is(err, fs.ErrExist) {
				fi, lerr := p.Lstat(ctx, to)
				switch {
				case lerr == nil && fi.IsDir():
					return nil
				case lerr == nil && fi.Mode()&fs.ModeSymlink != 0:
					if err := p.Remove(ctx, to, false); err != nil {
						return err
					}
					err = p.Mkdir(ctx, to, perm, false)
				default:
					// A file: the error Mkdir with parents gives it.
					return p.Mkdir(ctx, to, perm, true)
				}
			}
			if err != nil {
				return err
			}
			fresh[name] = true
		case link != "":
			_ = p.Remove(ctx, to, false) // replaced, as tar replaces it
			if err := p.Symlink(ctx, link, to); err != nil {
				return err
			}
			if ts != nil {
				// Its own time (Lchtimes: Chtimes would set its
				// target's), beside the files' copies.
				g.Go(func() error { return setTime(ctx, ts, to, info.ModTime(), true) })
			}
		default:
			inFresh := fresh[path.Dir(name)]
			g.Go(func() error {
				if err := copyFile(ctx, p, src, name, to, info, inFresh); err != nil {
					return err
				}
				return setTime(ctx, ts, to, info.ModTime(), false)
			})
		}
		return nil
	})
	if err := walkOrCopyErr(werr, g.Wait()); err != nil || ts == nil {
		return err
	}
	g, ctx = errgroup.WithContext(parent)
	g.SetLimit(transferConcurrency)
	for _, e := range dirTimes {
		g.Go(func() error { return setTime(ctx, ts, e.name, e.mtime, false) })
	}
	return g.Wait()
}

// entryTime is a host path and the modification time it is to have.
type entryTime struct {
	name  string
	mtime time.Time
}

// setTime gives name on the host mtime as the tar stream would (whole
// seconds, the zero time as 1970), as its access time too, as busybox's
// tar does; with link, a symbolic link's own (Lchtimes). A host that
// cannot set it (ErrNotSupported: an SFTP server without SETSTAT, or
// for a link without lsetstat@openssh.com, a time SFTP cannot carry),
// or that lets this user write the file but not set its time
// (fs.ErrPermission: a file of another's, which the filesystem way
// writes over where tar makes a new one), leaves the file the time it
// was written, as before times went this way, rather than fail an
// Upload whose files all arrived.
func setTime(ctx context.Context, ts TimeSetter, name string, mtime time.Time, link bool) error {
	if ts == nil {
		return nil
	}
	t := time.Unix(0, 0)
	if !mtime.IsZero() {
		t = time.Unix(mtime.Unix(), 0)
	}
	set := ts.Chtimes
	if link {
		set = ts.Lchtimes
	}
	err := set(ctx, name, t, t)
	if errors.Is(err, ErrNotSupported) || errors.Is(err, fs.ErrPermission) {
		return nil
	}
	return err
}

// copyFile writes src's file name to the host's to, replacing a symbolic
// link there unless its directory is one this Upload made (inFresh).
func copyFile(ctx context.Context, p Provider, src fs.FS, name, to string, info fs.FileInfo, inFresh bool) error {
	if !inFresh {
		if fi, err := p.Lstat(ctx, to); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			if err := p.Remove(ctx, to, false); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	f, err := src.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	if fw, ok := p.(FileWriter); ok {
		// Cheaper than Create, Write, Close, though both
		// take two round trips: 200 files of 4 KiB over
		// SFTP in 0.46x the time (BenchmarkTransfer's
		// upload/fs both ways, 3 alternating runs).
		return fw.WriteFile(ctx, to, info.Mode().Perm(), f, nil)
	}
	w, err := p.Create(ctx, to, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, f); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}

// fsProvider is the connection's filesystem provider, as Host.FS gives it.
func (h *Host) fsProvider(ctx context.Context) (Provider, error) {
	c, err := h.connection(ctx)
	if err != nil {
		return nil, err
	}
	return c.fs, nil
}

func download(ctx context.Context, h *Host, dir, dst string, opts *TransferOptions) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	x := &extractor{root: root}
	x.maxBytes, x.maxFiles = opts.limits()
	if opts == nil || !opts.NoTar {
		got, err := downloadTar(ctx, h, dir, x)
		if got || err != nil {
			return x.finish(err)
		}
	}
	return x.finish(downloadFS(ctx, h, dir, x))
}

// downloadTar reads dir from tar on the host into x; got is false when
// the host has no tar.
func downloadTar(ctx context.Context, h *Host, dir string, x *extractor) (got bool, err error) {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The checks before cd say why dir cannot be read, in the exit
	// statuses of ExecProvider's scripts, so that a missing tree is
	// fs.ErrNotExist as on the filesystem way, not cd's message.
	p, err := remoteTar(ctx, h, nxFunc+`[ -e "$1" ] || nx "$1"
[ -d "$1" ] || exit 93
[ -r "$1" ] && [ -x "$1" ] || exit 92
cd -- "$1" && exec tar -c -f - .`, dir)
	if err != nil {
		return false, err
	}
	_ = p.Stdin().Close()
	var stderr headBuffer
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(&stderr, p.Stderr()) })
	tr := tar.NewReader(p.Stdout())
	entries := 0
	var xerr error
	cut := false // the archive ended short or malformed
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			xerr, cut = err, true
			break
		}
		entries++
		if xerr = x.tarEntry(hdr, tr); xerr != nil {
			break
		}
	}
	if xerr != nil {
		// Stop the host's tar rather than read the rest.
		cancel()
		_ = p.Kill(SIGKILL)
	}
	wg.Go(func() { _, _ = io.Copy(io.Discard, p.Stdout()) })
	// Not past ctx, as Exec (a host that stopped answering: waitCtx). Nor
	// long past the archive's end: what is left is its padding and tar's
	// exit, but a process tar or the host's shell startup files left in
	// the background may hold the session's output, and sshd ends a
	// session only once every holder let it go. Then tar's session is
	// closed, and an exit the host told by then is tar's word; the copies
	// and the wait end with the session, or are left to, as waitCtx's.
	exited, perr := waitGrace(parent, p)
	if !exited && parent.Err() == nil {
		cancel()
		exited, perr = waitGrace(parent, p)
		if !exited || perr != nil || xerr != nil {
			if parent.Err() != nil {
				return true, perr
			}
			if xerr == nil {
				xerr = &outputHeldError{done: "sent its archive", stderr: stderr.String()}
			}
			return true, xerr
		}
	}
	if !exited {
		return true, perr
	}
	wg.Wait()
	if xerr != nil {
		if perr != nil && (cut || errors.Is(xerr, io.ErrUnexpectedEOF)) {
			// A cut archive: what the host's tar said is the reason.
			return true, tarFailed(perr, &stderr)
		}
		return true, xerr
	}
	if entries == 0 && ExitCode(perr) == tarMissing {
		return false, nil
	}
	if e, ok := exitErrnos[ExitCode(perr)]; ok && entries == 0 {
		return true, &fs.PathError{Op: "open", Path: dir, Err: e}
	}
	if perr != nil {
		return true, tarFailed(perr, &stderr)
	}
	return true, nil
}

// waitGrace is waitCtx bounded by outputHeldGrace too.
func waitGrace(ctx context.Context, p Process) (exited bool, err error) {
	grace, stop := context.WithTimeout(ctx, outputHeldGrace)
	defer stop()
	return waitCtx(grace, p)
}

// outputHeldError is a transfer whose tar on the host was done (its
// archive sent, or its exit told) but whose session did not end, or not
// say how tar ended, in the time given to it after.
type outputHeldError struct{ done, stderr string }

func (e *outputHeldError) Error() string {
	msg := fmt.Sprintf("tar on the host %s but its session stayed open %v after (a process left in the background, by the host's shell startup files say, holding its output?), so how it ended is unknown: keep such processes off the session's output (redirect theirs), or use TransferOptions.NoTar", e.done, outputHeldGrace)
	if e.stderr != "" {
		msg += "; it said: " + e.stderr
	}
	return msg
}

// unsafeEntryError is a name or link target from the host that would
// leave the destination.
type unsafeEntryError struct{ name, why string }

func (e *unsafeEntryError) Error() string {
	return fmt.Sprintf("refused %q from the host: %s", e.name, e.why)
}

// extractor writes a tree from the host under root, checking each name.
type extractor struct {
	root            *os.Root
	maxBytes, bytes int64
	maxFiles, files int
	rootSeen        bool // the archive's "./" came
	mu              sync.Mutex
	// dirs' modes and times are applied at the end: a read-only dir
	// must first take its files, and each entry made in a directory
	// moves its time.
	dirs map[string]dirAttrs
}

// dirAttrs is what a directory from the host is given once the tree is
// in.
type dirAttrs struct {
	perm  fs.FileMode
	mtime time.Time
}

// localName is the archive or host name n as a name under root, or an
// error when it is not relative and free of "..". ok is false for the
// root itself.
func localName(n string) (string, bool, error) {
	c := strings.TrimSuffix(strings.TrimPrefix(n, "./"), "/")
	if c == "" || c == "." {
		return "", false, nil
	}
	// Not fs.ValidPath, which refuses names that are not UTF-8: a
	// host's names are bytes ("caf\xe9" from a Latin-1 system), and
	// os.Root takes them as they are.
	for _, el := range strings.Split(c, "/") {
		if el == "" || el == "." || el == ".." || strings.Contains(el, "\\") {
			return "", false, &unsafeEntryError{n, "not a relative name without \"..\""}
		}
	}
	return c, true, nil
}

// count charges one entry of size bytes to the limits.
func (x *extractor) count(size int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.files++
	x.bytes += size
	if x.files > x.maxFiles {
		return fmt.Errorf("%w: more than %d files", ErrTransferLimit, x.maxFiles)
	}
	if x.bytes > x.maxBytes || size < 0 {
		return fmt.Errorf("%w: more than %d bytes", ErrTransferLimit, x.maxBytes)
	}
	return nil
}

func (x *extractor) tarEntry(hdr *tar.Header, r io.Reader) error {
	name, ok, err := localName(hdr.Name)
	if err != nil {
		return err
	}
	if !ok {
		// The tree's own "./" is free, once; any more, and any with data,
		// are a host sending entries that are skipped, counted as below.
		if x.rootSeen || hdr.Typeflag != tar.TypeDir {
			return x.count(max(hdr.Size, 0))
		}
		x.rootSeen = true
		return nil
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := x.count(0); err != nil {
			return err
		}
		return x.dir(name, fs.FileMode(hdr.Mode).Perm(), hdr.ModTime)
	case tar.TypeReg:
		if err := x.count(hdr.Size); err != nil {
			return err
		}
		return x.file(name, fs.FileMode(hdr.Mode).Perm(), hdr.ModTime, r)
	case tar.TypeSymlink:
		if err := x.count(0); err != nil {
			return err
		}
		if err := x.symlink(name, hdr.Linkname); err != nil {
			return err
		}
		return x.setLinkTime(name, hdr.ModTime)
	case tar.TypeLink:
		if err := x.count(0); err != nil {
			return err
		}
		old, ok, err := localName(hdr.Linkname)
		if err != nil || !ok {
			return &unsafeEntryError{hdr.Linkname, "a hard link's target must be a file in the tree"}
		}
		if fi, err := x.root.Lstat(old); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			// A hard link to a link is the same target from another
			// directory, where it may lead elsewhere: made as the link
			// it is, checked from there.
			target, err := x.root.Readlink(old)
			if err != nil {
				return err
			}
			return x.symlink(name, target)
		}
		if err := x.parents(name); err != nil {
			return err
		}
		_ = x.root.Remove(name)
		return x.root.Link(old, name)
	}
	// Devices, pipes and kinds unknown are skipped, but counted: the
	// limits bound what a host may send, and skipping is no cheaper than
	// taking (tar.Reader reads past the data).
	return x.count(max(hdr.Size, 0))
}

// parents makes the directories name is in.
func (x *extractor) parents(name string) error {
	if d := path.Dir(name); d != "." {
		return x.root.MkdirAll(d, 0o755)
	}
	return nil
}

func (x *extractor) dir(name string, perm fs.FileMode, mtime time.Time) error {
	if err := x.root.MkdirAll(name, 0o755); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.dirs == nil {
		x.dirs = map[string]dirAttrs{}
	}
	x.dirs[name] = dirAttrs{perm, mtime}
	return nil
}

// setTime gives name under root mtime, the access time left as it is
// (tar too sets the time of the extraction). The zero time is a host
// that gave none; a file of another user's, which this user could write
// but may not set the time of, keeps the time it was written, as on
// Upload (setTime).
func (x *extractor) setTime(name string, mtime time.Time) error {
	if mtime.IsZero() {
		return nil
	}
	if err := x.root.Chtimes(name, time.Time{}, mtime); err != nil && !errors.Is(err, fs.ErrPermission) {
		return err
	}
	return nil
}

// setLinkTime is setTime of a symbolic link's own time, which a file
// system that keeps none (ErrUnsupported) leaves too.
func (x *extractor) setLinkTime(name string, mtime time.Time) error {
	if mtime.IsZero() {
		return nil
	}
	if err := setLinkTime(x.root, name, mtime); err != nil && !errors.Is(err, fs.ErrPermission) && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return nil
}

func (x *extractor) file(name string, perm fs.FileMode, mtime time.Time, r io.Reader) error {
	if err := x.parents(name); err != nil {
		return err
	}
	// A symbolic link in its place is replaced, not written through.
	if fi, err := x.root.Lstat(name); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		_ = x.root.Remove(name)
	}
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := x.root.Chmod(name, perm); err != nil { // an existing file keeps its mode through O_CREATE
		return err
	}
	return x.setTime(name, mtime)
}

func (x *extractor) symlink(name, target string) error {
	if target == "" || path.IsAbs(target) || strings.Contains(target, "\\") {
		return &unsafeEntryError{name, fmt.Sprintf("its link target %q is not relative", target)}
	}
	if j := path.Join(path.Dir(name), target); j == ".." || strings.HasPrefix(j, "../") {
		return &unsafeEntryError{name, fmt.Sprintf("its link target %q leaves the destination", target)}
	}
	// The check above is lexical; the kernel follows links before it
	// climbs "..". So the link's ".." climbs from where its name says
	// only when its directories are directories, not links (b -> . made
	// b/x -> .. dst/x -> .., dst's parent), and only a leading ".." is
	// sure to stay lexical: in b/c/.., b/c may be made a link later (to
	// .., which from b is dst) and the ".." then climbs from there. A
	// directory never becomes a link once it holds this one, so both
	// hold for good.
	seen := false
	for _, el := range strings.Split(target, "/") {
		switch el {
		case "", ".":
		case "..":
			if seen {
				return &unsafeEntryError{name, fmt.Sprintf("its link target %q has \"..\" after a name, which a link there could lead out of the destination", target)}
			}
		default:
			seen = true
		}
	}
	if d := path.Dir(name); d != "." {
		for i := 0; i <= len(d); i++ {
			if i < len(d) && d[i] != '/' {
				continue
			}
			if fi, err := x.root.Lstat(d[:i]); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
				return &unsafeEntryError{name, fmt.Sprintf("it would be made through the link %q", d[:i])}
			}
		}
	}
	if err := x.parents(name); err != nil {
		return err
	}
	_ = x.root.Remove(name)
	return x.root.Symlink(target, name)
}

// finish applies the directories' modes and times, deepest first, and
// returns err. Also after a failure: what was written stays usable, and
// dated as the host has it.
func (x *extractor) finish(err error) error {
	names := make([]string, 0, len(x.dirs))
	for n := range x.dirs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range slices.Backward(names) {
		a := x.dirs[n]
		if cerr := x.root.Chmod(n, a.perm|0o700); cerr != nil && err == nil {
			err = cerr
		}
		if terr := x.setTime(n, a.mtime); terr != nil && err == nil {
			err = terr
		}
	}
	return err
}

// downloadFS reads dir through the host's filesystem into x,
// transferConcurrency files at a time.
func downloadFS(ctx context.Context, h *Host, dir string, x *extractor) error {
	p, err := h.fsProvider(ctx)
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(transferConcurrency)
	var walk func(rel string) error
	walk = func(rel string) error {
		ents, err := p.ReadDir(ctx, path.Join(dir, rel))
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := ctxErr(ctx); err != nil {
				return err // a file's copy failed: g.Wait has its error
			}
			if e.Name() == "." || e.Name() == ".." {
				continue
			}
			if strings.Contains(e.Name(), "/") {
				return &unsafeEntryError{e.Name(), "a name in a directory listing has a slash"}
			}
			name, _, err := localName(path.Join(rel, e.Name()))
			if err != nil {
				return err
			}
			from := path.Join(dir, name)
			switch t := e.Type(); {
			case t.IsDir():
				info, err := e.Info()
				if err != nil {
					return err
				}
				if err := x.count(0); err != nil {
					return err
				}
				if err := x.dir(name, info.Mode().Perm(), info.ModTime()); err != nil {
					return err
				}
				if err := walk(name); err != nil {
					return err
				}
			case t&fs.ModeSymlink != 0:
				if err := x.count(0); err != nil {
					return err
				}
				target, err := p.Readlink(ctx, from)
				if err != nil {
					return err
				}
				if err := x.symlink(name, target); err != nil {
					return err
				}
				info, err := e.Info()
				if err != nil {
					return err
				}
				if err := x.setLinkTime(name, info.ModTime()); err != nil {
					return err
				}
			case t.IsRegular():
				info, err := e.Info()
				if err != nil {
					return err
				}
				if err := x.count(info.Size()); err != nil {
					return err
				}
				g.Go(func() error {
					r, err := p.Open(ctx, from)
					if err != nil {
						return err
					}
					defer r.Close()
					// The size the listing gave bounds what is taken.
					lr := &io.LimitedReader{R: r, N: info.Size() + 1}
					if err := x.file(name, info.Mode().Perm(), info.ModTime(), lr); err != nil {
						return err
					}
					if lr.N == 0 {
						return fmt.Errorf("%w: %s grew while being read", ErrTransferLimit, from)
					}
					return nil
				})
			default:
				// Devices, pipes, sockets: skipped, but an entry for
				// MaxFiles all the same, or a listing of them had no
				// bound.
				if err := x.count(0); err != nil {
					return err
				}
			}
		}
		return nil
	}
	werr := walk("")
	return walkOrCopyErr(werr, g.Wait())
}

// walkOrCopyErr is a filesystem transfer's error: the walk's own, or,
// when the walk stopped because a file's copy failed (which cancels the
// group's ctx), that copy's.
func walkOrCopyErr(walk, copies error) error {
	if walk != nil && (copies == nil || !errors.Is(walk, context.Canceled)) {
		return walk
	}
	return copies
}
