package hostgate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hostgate/hostgate/internal/shell"
)

// ExecProvider returns a filesystem Provider for any POSIX host reached
// through t: each operation is one small shell command built from POSIX
// tools (uname, stat, ls, mkdir, rmdir, rm, mv, cp, cat, test, ln, readlink,
// realpath, chmod, touch). Paths travel as positional parameters of `sh -c`, never
// inside the script, and every word is quoted by the transport. A short
// prologue tests the operands and exits with a distinct status per errno
// (see exitENOENT…), so failures map to io/fs errors without parsing
// localised messages; tool stderr (under LC_ALL=C) is the fallback.
//
// Reads and writes stream through cat: nothing is held in memory.
// Operations that are atomic as system calls (Rename onto an empty
// directory, Symlink) are a test then an action here, so racing another
// writer on the same path can see the state in between.
func ExecProvider(t Transport) Provider {
	return &execProvider{t: t}
}

type execProvider struct {
	t Transport

	mu     sync.Mutex
	format *statFormat // decided once by uname; nil until known
}

var _ Provider = (*execProvider)(nil)

// Distinct exit statuses the scripts use for errno values. Tools exit 1 or
// 2 on failure, so these stay clear of them.
const (
	exitENOENT    = 90
	exitEEXIST    = 91
	exitEACCES    = 92
	exitENOTDIR   = 93
	exitEISDIR    = 94
	exitENOTEMPTY = 95
	exitEINVAL    = 96
	exitELOOP     = 97
	exitENOTSUP   = 98 // a tool the call needs is not on the host
)

var exitErrnos = map[int]error{
	exitENOENT:    fs.ErrNotExist,
	exitEEXIST:    fs.ErrExist,
	exitEACCES:    fs.ErrPermission,
	exitENOTDIR:   syscall.ENOTDIR,
	exitEISDIR:    syscall.EISDIR,
	exitENOTEMPTY: syscall.ENOTEMPTY,
	exitEINVAL:    syscall.EINVAL,
	exitELOOP:     syscall.ELOOP,
	exitENOTSUP:   ErrNotSupported,
}

// maxStderr bounds the stderr kept for error messages.
const maxStderr = 4 << 10

// maxSmallOutput bounds the stdout of metadata commands (stat, readlink,
// realpath); ReadDir output is bounded by maxDirOutput.
const (
	maxSmallOutput = 64 << 10
	maxDirOutput   = 64 << 20
)

// statFormat is how one stat dialect prints type+mode (hex), size and
// mtime (seconds), space separated, one line per file.
type statFormat struct {
	flag   string // -c (GNU, busybox) or -f (BSD)
	format string
}

var (
	gnuStat = &statFormat{flag: "-c", format: "%f %s %Y"}
	bsdStat = &statFormat{flag: "-f", format: "%Xp %z %m"}
)

// safePath keeps a relative path that starts with "-" from being read as an
// option by tools that do not take "--" (realpath on some systems).
func safePath(name string) string {
	if strings.HasPrefix(name, "-") {
		return "./" + name
	}
	return name
}

// run executes script under sh -c with args as $1…, stdin closed, and
// returns stdout (at most limit bytes) and an error mapped to io/fs.
func (p *execProvider) run(ctx context.Context, limit int64, script string, args ...string) ([]byte, error) {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	proc, err := p.spawn(ctx, script, args...)
	if err != nil {
		return nil, err
	}
	_ = proc.Stdin().Close()
	progress := make(chan struct{}, 1)
	var stderr, stdout bytes.Buffer
	var stderrOver, over atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		stderrOver.Store(readStderr(&stderr, progressReader{proc.Stderr(), progress}, func() {
			_ = proc.Kill(SIGKILL)
			cancel()
		}))
	})
	wg.Go(func() {
		src := progressReader{proc.Stdout(), progress}
		if n, _ := io.Copy(&stdout, io.LimitReader(src, limit+1)); n > limit {
			// Nothing past the limit is used: reading on to the end
			// of a host's answer without end held the call until ctx
			// ended.
			over.Store(true)
			_ = proc.Kill(SIGKILL)
			cancel()
		}
		_, _ = io.Copy(io.Discard, src)
	})
	// Not past ctx, as Exec: the streams end with ctx (the session is
	// closed on this side), but the host's word that the command ended
	// does not come from a host that stopped answering until its
	// connection is given up on. Nor long past the script's exit, where
	// the host tells it before the session's end (waitTold): sshd keeps
	// the session open while a process left in the background holds its
	// output, one the shell's startup files started say. The script's
	// exit is then its word, and what it wrote came before it.
	exited, _, werr := waitTold(parent, proc, progress)
	if exited {
		wg.Wait()
	}
	if over.Load() {
		// Before ctx's error: killed at the limit, not by ctx.
		return nil, fmt.Errorf("%w: the host's answer passed %d bytes, the most ExecProvider reads from one command (for a directory this large, list it through SFTP or with Host.Exec and a MaxOutput of your own)", ErrOutputLimit, limit)
	}
	if stderrOver.Load() {
		return nil, stderrLimitErr()
	}
	if !exited {
		if werr == nil {
			// The session stayed open after the kill too.
			werr = errors.New("the host said the command exited but kept its session open after, and did not close it when asked (a process the shell's startup files left in the background holding its output?)")
		}
		// The reads may go on: their buffers are theirs.
		return nil, werr
	}
	return stdout.Bytes(), mapExit(werr, stderr.Bytes())
}

// nxFunc prefixes every script. `nx PATH` exits for a PATH that tests
// false with -e: test(1) cannot tell "missing" from "not allowed to look",
// so it walks up to the nearest existing ancestor and exits EACCES when
// that directory is not searchable, ENOTDIR when it is not a directory,
// else ENOENT, unless stat says the lookup of PATH went round a symlink
// loop (a -> b -> a, at PATH or on the way): test(1) says false for that
// too, and it is ELOOP. Only a failed call runs that stat, and no program
// but stat says ELOOP of a lookup alone.
const nxFunc = `nx() {
  p=$1
  while :; do
    case $p in */*) p=${p%/*}; [ -n "$p" ] || p=/;; *) p=.;; esac
    if [ -d "$p" ]; then [ -x "$p" ] || exit 92; lp "$1"; exit 90; fi
    [ -e "$p" ] && exit 93
    case $p in /|.) lp "$1"; exit 90;; esac
  done
}
lp() {
  case $(stat -L -- "$1" 2>&1 >/dev/null) in *"$lt1"*|*"$lt2"*) exit 97;; esac
}
lt1='levels of symbolic links' lt2='ymbolic link loop'
`

func (p *execProvider) spawn(ctx context.Context, script string, args ...string) (Process, error) {
	argv := append([]string{"sh", "-c", nxFunc + script, "sh"}, args...)
	return p.t.Spawn(ctx, argv, SpawnOptions{Env: map[string]string{"LC_ALL": "C"}})
}

// progressReader is r, signalling progress (not waiting) at each read
// that returns bytes, for waitTold.
type progressReader struct {
	r        io.Reader
	progress chan<- struct{}
}

func (r progressReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	if n > 0 {
		select {
		case r.progress <- struct{}{}:
		default:
		}
	}
	return n, err
}

// readStderr copies a command's stderr into dst up to maxStderr bytes.
// Past that it calls stop, which must kill the command and close its
// session, and reports true. Reading on, discarding, held the call for as
// long as the host wrote, for ever on a host writing without end (ctx was
// the only way out); leaving the rest unread is no better, as an SSH
// channel's stderr shares its window with stdout, so the command's stdout
// would stall behind it. No script of ExecProvider's writes that much, so
// such a host is broken or hostile and the call fails. src is read to its
// end either way, which after stop comes with the session's close, so a
// transport that copies into a pipe can finish.
func readStderr(dst *bytes.Buffer, src io.Reader, stop func()) (over bool) {
	n, _ := io.Copy(dst, io.LimitReader(src, maxStderr+1))
	if n > maxStderr {
		dst.Truncate(maxStderr)
		stop()
		over = true
	}
	_, _ = io.Copy(io.Discard, src)
	return over
}

// stderrLimitErr is the error of a command killed by readStderr.
func stderrLimitErr() error {
	return fmt.Errorf("%w: the host's command wrote more than %d bytes on stderr, the most ExecProvider reads for an error message, and was killed (a shell that prints on starting, from a startup file such as ~/.bashrc, should print nothing when not interactive)", ErrOutputLimit, maxStderr)
}

// mapExit turns a script's exit into an io/fs-flavoured error.
func mapExit(werr error, stderr []byte) error {
	if werr == nil {
		return nil
	}
	var ee *ExitError
	if !errors.As(werr, &ee) {
		return werr
	}
	if e, ok := exitErrnos[ee.Code]; ok {
		return e
	}
	if e := errnoFromStderr(stderr); e != nil {
		return e
	}
	msg := strings.TrimSpace(string(stderr))
	if msg == "" {
		return werr
	}
	return fmt.Errorf("%w: %s", werr, msg)
}

// errnoFromStderr recognises the C-locale strerror texts tools print.
func errnoFromStderr(stderr []byte) error {
	for _, m := range []struct {
		text string
		err  error
	}{
		{"No such file or directory", fs.ErrNotExist},
		{"Directory nonexistent", fs.ErrNotExist}, // dash: cannot create
		{"nonexistent directory", fs.ErrNotExist}, // busybox sh
		{"Permission denied", fs.ErrPermission},
		{"Operation not permitted", fs.ErrPermission},
		{"File exists", fs.ErrExist},
		{"Not a directory", syscall.ENOTDIR},
		{"Path has non-directory component", syscall.ENOTDIR}, // busybox's own word for ENOTDIR
		{"Is a directory", syscall.EISDIR},
		{"Too many levels of symbolic links", syscall.ELOOP}, // glibc, BSD
		{"Symbolic link loop", syscall.ELOOP},                // musl (Alpine's busybox)
		{"Directory not empty", syscall.ENOTEMPTY},
		{"Read-only file system", syscall.EROFS},
		{"No space left on device", syscall.ENOSPC},
		{"Invalid argument", syscall.EINVAL},            // busybox mv of a directory into itself, BSD mv
		{"to a subdirectory of itself", syscall.EINVAL}, // GNU mv's words for that EINVAL
	} {
		if bytes.Contains(stderr, []byte(m.text)) {
			return m.err
		}
	}
	return nil
}

func pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// statFormat asks uname once which stat dialect the host speaks: BSD stat
// (-f) on the BSDs and macOS, GNU/busybox (-c) everywhere else.
func (p *execProvider) statFormat(ctx context.Context) (*statFormat, error) {
	p.mu.Lock()
	f := p.format
	p.mu.Unlock()
	if f != nil {
		return f, nil
	}
	out, err := p.run(ctx, maxSmallOutput, "uname -s")
	if err != nil {
		return nil, fmt.Errorf("uname: %w", err)
	}
	f = statFormatFor(strings.TrimSpace(string(out)))
	p.mu.Lock()
	p.format = f
	p.mu.Unlock()
	return f, nil
}

func statFormatFor(uname string) *statFormat {
	switch strings.ToLower(uname) {
	case "darwin", "freebsd", "openbsd", "netbsd", "dragonfly":
		return bsdStat
	}
	return gnuStat
}

func (p *execProvider) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	return p.stat(ctx, "stat", name, true)
}

func (p *execProvider) Lstat(ctx context.Context, name string) (fs.FileInfo, error) {
	return p.stat(ctx, "lstat", name, false)
}

func (p *execProvider) stat(ctx context.Context, op, name string, follow bool) (fs.FileInfo, error) {
	if name == "" {
		return nil, pathErr(op, name, fs.ErrNotExist)
	}
	f, err := p.statFormat(ctx)
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	script := `[ -e "$1" ] || [ -L "$1" ] || nx "$1"; exec stat "$2" "$3" -- "$1"`
	if follow {
		script = `[ -e "$1" ] || nx "$1"; exec stat -L "$2" "$3" -- "$1"`
	}
	out, err := p.run(ctx, maxSmallOutput, script, safePath(name), f.flag, f.format)
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	fi, err := parseStat(bytes.TrimSuffix(out, []byte("\n")), path.Base(name))
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	return fi, nil
}

// parseStat parses one "MODEHEX SIZE MTIME" line (no newline) as printed by
// the stat formats above. The name is not in the output: names may hold
// newlines, so the caller supplies it.
func parseStat(line []byte, name string) (*fileInfo, error) {
	fields := strings.Fields(string(line))
	if len(fields) != 3 {
		return nil, fmt.Errorf("stat output %q: want 3 fields", truncate(line))
	}
	raw, err := strconv.ParseUint(fields[0], 16, 32)
	if err != nil {
		return nil, fmt.Errorf("stat mode %q: %w", fields[0], err)
	}
	size, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil || size < 0 {
		return nil, fmt.Errorf("stat size %q: invalid", fields[1])
	}
	mtime, err := strconv.ParseInt(fields[2], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("stat mtime %q: %w", fields[2], err)
	}
	return &fileInfo{name: name, size: size, mode: fileModeFromUnix(uint32(raw)), mtime: time.Unix(mtime, 0)}, nil
}

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// fileModeFromUnix converts a st_mode to an fs.FileMode.
func fileModeFromUnix(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & 0o170000 {
	case 0o040000:
		mode |= fs.ModeDir
	case 0o120000:
		mode |= fs.ModeSymlink
	case 0o010000:
		mode |= fs.ModeNamedPipe
	case 0o140000:
		mode |= fs.ModeSocket
	case 0o020000:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case 0o060000:
		mode |= fs.ModeDevice
	case 0o100000:
	default:
		mode |= fs.ModeIrregular
	}
	if m&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// unixPerm converts the permission bits of an fs.FileMode to chmod's octal.
func unixPerm(mode fs.FileMode) string {
	m := uint32(mode.Perm())
	if mode&fs.ModeSetuid != 0 {
		m |= 0o4000
	}
	if mode&fs.ModeSetgid != 0 {
		m |= 0o2000
	}
	if mode&fs.ModeSticky != 0 {
		m |= 0o1000
	}
	return strconv.FormatUint(uint64(m), 8)
}

// fileInfo is the fs.FileInfo ExecProvider returns.
type fileInfo struct {
	name  string
	size  int64
	mode  fs.FileMode
	mtime time.Time
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return fi.size }
func (fi *fileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi *fileInfo) ModTime() time.Time { return fi.mtime }
func (fi *fileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi *fileInfo) Sys() any           { return nil }

// readDirScript lists $1: the names ("./"-prefixed, so stat never reads
// "-" as stdin) NUL-terminated, an empty name as the
// separator, then one lstat line per name in the same order. Globs are used
// rather than ls so names with newlines survive; unmatched patterns are
// dropped by the existence test. The -r/-x test comes first because an
// unreadable directory would otherwise glob to nothing and list as empty.
// stat runs on batches of 200 names, each named by its index into "$@"
// ("${12}") in the string eval runs, so no name's bytes are ever parsed:
// rebuilding "$@" name by name was quadratic (10,000 entries took 35 s),
// and one stat of 60,000 names failed with E2BIG.
const readDirScript = `[ -e "$1" ] || nx "$1"
[ -d "$1" ] || exit 93
[ -r "$1" ] && [ -x "$1" ] || exit 92
cd -- "$1" || exit 92
s=$2; f=$3
set -- * .[!.]* ..?*
c=0
for n; do if [ -e "$n" ] || [ -L "$n" ]; then printf './%s\0' "$n"; c=1; fi; done
[ $c = 0 ] && exit 0
printf '\0'
i=0; k=0; refs=
for n; do
  i=$((i+1))
  if [ -e "$n" ] || [ -L "$n" ]; then refs="$refs \"./\${$i}\""; k=$((k+1)); fi
  if [ $k -ge 200 ]; then eval "stat \"\$s\" \"\$f\" -- $refs" || exit; refs=; k=0; fi
done
if [ $k -gt 0 ]; then eval "stat \"\$s\" \"\$f\" -- $refs" || exit; fi
exit 0`

func (p *execProvider) ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	if name == "" {
		return nil, pathErr("readdir", name, fs.ErrNotExist)
	}
	f, err := p.statFormat(ctx)
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	// An entry removed between the glob and stat makes stat fail (ENOENT)
	// or the listing inconsistent; a few tries let a busy directory settle.
	for try := 0; ; try++ {
		out, err := p.run(ctx, maxDirOutput, readDirScript, shell.CdOperand(name), f.flag, f.format)
		if err == nil {
			ents, perr := parseDirListing(out)
			if perr == nil {
				return ents, nil
			}
			err = perr
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, pathErr("readdir", name, err)
		} else if _, serr := p.Stat(ctx, name); serr != nil {
			return nil, pathErr("readdir", name, fs.ErrNotExist) // the directory itself
		}
		if try == 2 || ctx.Err() != nil {
			return nil, pathErr("readdir", name, err)
		}
	}
}

// parseDirListing parses readDirScript's output into entries sorted by name.
func parseDirListing(out []byte) ([]fs.DirEntry, error) {
	if len(out) == 0 {
		return nil, nil
	}
	sep := bytes.Index(out, []byte{0, 0})
	if sep < 0 {
		return nil, errors.New("readdir output: no separator")
	}
	names := strings.Split(string(out[:sep]), "\x00")
	lines := strings.Split(strings.TrimSuffix(string(out[sep+2:]), "\n"), "\n")
	if len(lines) != len(names) {
		return nil, fmt.Errorf("readdir output: %d names but %d stat lines", len(names), len(lines))
	}
	ents := make([]fs.DirEntry, 0, len(names))
	for i, n := range names {
		n = strings.TrimPrefix(n, "./")
		fi, err := parseStat([]byte(lines[i]), n)
		if err != nil {
			return nil, err
		}
		ents = append(ents, fs.FileInfoToDirEntry(fi))
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	return ents, nil
}

func (p *execProvider) Mkdir(ctx context.Context, name string, perm fs.FileMode, parents bool) error {
	// mkdir -m ignores the umask; os.Mkdir applies it, so apply it here.
	script := `[ -e "$1" ] || [ -L "$1" ] && exit 91
m=$(umask) && m=$(printf '%o' $(( 0$2 & ~0$m ))) || exit
exec mkdir -m "$m" -- "$1"`
	if parents {
		// As os.MkdirAll: a file (or a link to one) at name is ENOTDIR, a
		// dangling link EEXIST; mkdir -p says EEXIST for both.
		// mkdir -p -m gives the last directory its mode and the parents
		// it makes the umask's; os.MkdirAll gives them perm too, so the
		// umask becomes perm's complement (mkdir -p still adds u+wx to
		// a parent, which it needs to make the next).
		script = `[ -d "$1" ] && exit 0
[ -e "$1" ] && exit 93
[ -L "$1" ] && exit 91
m=$(umask) && m=$(printf '%o' $(( 0$2 & ~0$m ))) && umask "$(printf '%o' $(( ~0$m & 0777 )))" || exit
exec mkdir -p -m "$m" -- "$1"`
	}
	if name == "" {
		return pathErr("mkdir", name, fs.ErrNotExist)
	}
	_, err := p.run(ctx, maxSmallOutput, script, safePath(name), unixPerm(perm))
	return pathErr("mkdir", name, err)
}

func (p *execProvider) Remove(ctx context.Context, name string, recursive bool) error {
	script := `[ -e "$1" ] || [ -L "$1" ] || nx "$1"
if [ -d "$1" ] && [ ! -L "$1" ]; then exec rmdir -- "$1"; fi
exec rm -f -- "$1"`
	if name == "" {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	if recursive && dotName(name) {
		// rm -rf refuses it too, but in words without an errno.
		return pathErr("remove", name, fmt.Errorf("%w: a name ending in \".\" or \"..\" is not removed recursively (as rm -rf and os.RemoveAll refuse it): name the directory itself", syscall.EINVAL))
	}
	if recursive {
		// $2 is name without its trailing slashes: a symlink named
		// "link/" is removed, as os.RemoveAll removes it, where GNU rm
		// -rf emptied the directory it leads to, through the slash.
		script = `[ -L "$2" ] && exec rm -f -- "$2"
[ -e "$1" ] || [ -L "$1" ] || nx "$1"
exec rm -rf -- "$1"`
		trimmed := strings.TrimRight(name, "/")
		if trimmed == "" {
			trimmed = name
		}
		_, err := p.run(ctx, maxSmallOutput, script, safePath(name), safePath(trimmed))
		return pathErr("remove", name, err)
	}
	_, err := p.run(ctx, maxSmallOutput, script, safePath(name))
	return pathErr("remove", name, err)
}

// dotName reports whether name's last element, past any trailing
// slashes, is "." or "..", as rm's check of its operands reads it.
func dotName(name string) bool {
	base := name
	if t := strings.TrimRight(name, "/"); t != "" {
		base = t
	}
	if i := strings.LastIndexByte(base, '/'); i >= 0 {
		base = base[i+1:]
	}
	return base == "." || base == ".."
}

// renameScript gives mv rename(2) semantics: mv would move into an
// existing directory (or a symlink to one) instead of replacing it. A name
// renamed to itself (or to another link of the same file) is left alone,
// as rename(2) leaves it; the steps below would have removed it first.
// The '|' after each canonical name keeps $(…) from eating a trailing
// newline of a name; the "./" keeps cd from taking a relative directory
// from CDPATH (shell.CdOperand).
const renameScript = `[ -e "$1" ] || [ -L "$1" ] || nx "$1"
canon() { case $1 in */*) d=${1%/*}; [ -n "$d" ] || d=/;; *) d=.;; esac
  case $d in /*) ;; *) d=./$d;; esac
  d=$(cd -P -- "$d" 2>/dev/null && pwd) || return 1; printf '%s/%s|' "${d%/}" "${1##*/}"; }
if a=$(canon "$1") && b=$(canon "$2") && [ "$a" = "$b" ]; then exit 0; fi
if [ ! -L "$1" ] && [ ! -L "$2" ] && [ "$1" -ef "$2" ]; then exit 0; fi
if [ -L "$2" ]; then rm -f -- "$2" || exit
elif [ -d "$2" ]; then
  if [ -d "$1" ] && [ ! -L "$1" ]; then rmdir -- "$2" 2>/dev/null || exit 95; else exit 94; fi
elif [ -e "$2" ] && [ -d "$1" ] && [ ! -L "$1" ]; then exit 93
fi
exec mv -f -- "$1" "$2"`

func (p *execProvider) Rename(ctx context.Context, oldname, newname string) error {
	if oldname == "" || newname == "" {
		return &LinkError{Op: "rename", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	_, err := p.run(ctx, maxSmallOutput, renameScript, safePath(oldname), safePath(newname))
	if err != nil {
		return &LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return nil
}

func (p *execProvider) Symlink(ctx context.Context, oldname, newname string) error {
	if newname == "" {
		return &LinkError{Op: "symlink", Old: oldname, New: newname, Err: fs.ErrNotExist}
	}
	_, err := p.run(ctx, maxSmallOutput, `[ -e "$2" ] || [ -L "$2" ] && exit 91
exec ln -s -- "$1" "$2"`, oldname, safePath(newname))
	if err != nil {
		return &LinkError{Op: "symlink", Old: oldname, New: newname, Err: err}
	}
	return nil
}

func (p *execProvider) Readlink(ctx context.Context, name string) (string, error) {
	if name == "" {
		return "", pathErr("readlink", name, fs.ErrNotExist)
	}
	out, err := p.run(ctx, maxSmallOutput, `[ -L "$1" ] || { [ -e "$1" ] && exit 96; nx "$1"; }
exec readlink -- "$1"`, safePath(name))
	if err != nil {
		return "", pathErr("readlink", name, err)
	}
	// readlink adds exactly one newline; the target may end in others.
	return string(bytes.TrimSuffix(out, []byte("\n"))), nil
}

func (p *execProvider) Realpath(ctx context.Context, name string) (string, error) {
	if name == "" {
		name = "."
	}
	out, err := p.run(ctx, maxSmallOutput, `[ -e "$1" ] || nx "$1"
exec realpath "$1"`, safePath(name))
	if err != nil {
		return "", pathErr("realpath", name, err)
	}
	return string(bytes.TrimSuffix(out, []byte("\n"))), nil
}

func (p *execProvider) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	if name == "" {
		return pathErr("chmod", name, fs.ErrNotExist)
	}
	// No "--": BSD's chmod would take it, after the mode, for a file.
	// safePath keeps $1 from reading as an option.
	_, err := p.run(ctx, maxSmallOutput, `[ -e "$1" ] || nx "$1"
exec chmod "$2" "$1"`, safePath(name), unixPerm(mode))
	return pathErr("chmod", name, err)
}

var _ TimeSetter = (*execProvider)(nil)

// touchStamp is touch -t's [[CC]YY]MMDDhhmm[.SS], the one form GNU
// coreutils, busybox and the BSDs' touch all take (GNU's -d @SECONDS is
// its own); it is local time, so the script runs touch with TZ=UTC0.
const touchStamp = "200601021504.05"

// chtimesScript sets $1's atime to the stamp $2 and its mtime to $3,
// leaving one whose stamp is empty. -c: a file removed meanwhile is not
// made again.
const chtimesScript = `[ -e "$1" ] || nx "$1"
command -v touch >/dev/null 2>&1 || exit 98
TZ=UTC0; export TZ
if [ "$2" = "$3" ]; then
  [ -z "$2" ] || exec touch -c -t "$2" -- "$1"
  exit 0
fi
if [ -n "$2" ]; then touch -c -a -t "$2" -- "$1" || exit; fi
[ -z "$3" ] || exec touch -c -m -t "$3" -- "$1"`

// lchtimesScript is chtimesScript of a symbolic link itself: touch -h,
// which GNU, busybox and the BSDs' touch take, on a name that may be a
// dangling link.
var lchtimesScript = `[ -L "$1" ] || ` + strings.ReplaceAll(chtimesScript, "touch -c ", "touch -c -h ")

func (p *execProvider) Chtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	return p.chtimes(ctx, "chtimes", chtimesScript, name, atime, mtime)
}

// Lchtimes is Chtimes with touch -h. A touch without it (a busybox
// built without FEATURE_TOUCH_NODEREF) says so as a bad option, which is
// ErrNotSupported.
func (p *execProvider) Lchtimes(ctx context.Context, name string, atime, mtime time.Time) error {
	err := p.chtimes(ctx, "lchtimes", lchtimesScript, name, atime, mtime)
	var pe *fs.PathError
	if errors.As(err, &pe) && !errors.Is(err, ErrNotSupported) && badOptionH(pe.Err.Error()) {
		pe.Err = fmt.Errorf("%w: the host's touch has no -h, which sets a link's own times: %v", ErrNotSupported, pe.Err)
	}
	return err
}

// badOptionH reports whether msg is a touch refusing -h: GNU's "invalid
// option -- 'h'", BSD's "illegal option -- h", busybox's "unrecognized
// option: h" or "invalid option -- 'h'".
func badOptionH(msg string) bool {
	for _, s := range []string{"option -- 'h'", "option -- h", "option: h", "option 'h'"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func (p *execProvider) chtimes(ctx context.Context, op, script, name string, atime, mtime time.Time) error {
	if name == "" {
		return pathErr(op, name, fs.ErrNotExist)
	}
	var stamps [2]string
	for i, t := range []time.Time{atime, mtime} {
		if t.IsZero() {
			continue
		}
		t = t.UTC()
		if y := t.Year(); y < 0 || y > 9999 {
			return pathErr(op, name, fmt.Errorf("%w: touch -t takes years 0000 to 9999, not %d", ErrNotSupported, y))
		}
		stamps[i] = t.Format(touchStamp)
	}
	_, err := p.run(ctx, maxSmallOutput, script, safePath(name), stamps[0], stamps[1])
	if errors.Is(err, ErrNotSupported) {
		err = fmt.Errorf("%w: the host has no touch, which ExecProvider sets times with", ErrNotSupported)
	}
	return pathErr(op, name, err)
}
