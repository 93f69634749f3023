//go:build linux

package deadline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxSecs bounds a runtime or an extension: past it a time.Duration
// overflows. Far beyond any gateway's maximum runtime.
const maxSecs = 1 << 32

// Run keeps the deadline. args[0] is the runtime in whole seconds, or "-"
// to read it as one line from stdin first (an EOF before the line ends
// it: the warm pool closed its container unclaimed). After the runtime,
// as long as dir is a directory uid 0 made (not a symlink: SetTimeout's,
// never the sandbox's) whose file "extra" holds more seconds past the
// runtime than were waited already, it waits the difference; an "extra"
// missing or empty is read again a second later (SetTimeout truncates it
// as it writes). Then it returns, and as the container's main process
// ends the container.
//
// It also returns on SIGTERM or SIGINT (docker stop; from inside the
// container too, as docker-init forwarded them to the script), ignores
// every other signal the kernel lets through to an init (so that none
// can make the Go runtime exit or dump), and reaps every child that ends:
// the container's orphans are PID 1's children, and zombies would count
// against the pids limit. It is meant to be PID 1 and changes the
// process's signal handling for good.
func Run(args []string, stdin io.Reader, dir string) error {
	return keep(args, stdin, dir, nil)
}

// keep is Run, calling started (when set) once the process has made every
// thread it will hold.
func keep(args []string, stdin io.Reader, dir string, started func() error) error {
	if len(args) != 1 {
		return fmt.Errorf("want one argument, the runtime in seconds or - to read it from stdin; got %q", args)
	}
	signal.Ignore()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	// One pending SIGCHLD is enough: each reaps every ended child.
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	reap() // children that ended before Notify
	startThreads(spareThreads)
	if started != nil {
		if err := started(); err != nil {
			return err
		}
		if n, err := threads(); err == nil && n > maxTasks {
			fmt.Fprintf(os.Stderr, "agent %s: started with %d threads, %d over the %d the sandbox's pids limit keeps for it (a loaded machine); its commands may hold that many fewer processes\n", Arg, n, n-maxTasks, maxTasks)
		}
	}

	var secs int64
	if args[0] == "-" {
		got := make(chan line, 1)
		// Left blocked on stdin when a signal ends the wait: the process
		// exits then.
		go func() { got <- readLine(stdin) }()
	wait:
		for {
			select {
			case l := <-got:
				if l.err == io.EOF {
					return nil
				}
				if l.err != nil {
					return fmt.Errorf("read the runtime from stdin: %w", l.err)
				}
				var err error
				if secs, err = parseSecs(l.text); err != nil {
					return fmt.Errorf("runtime from stdin: %w", err)
				}
				break wait
			case <-stop:
				return nil
			case <-chld:
				reap()
			}
		}
	} else {
		var err error
		if secs, err = parseSecs(args[0]); err != nil {
			return fmt.Errorf("runtime: %w", err)
		}
	}

	timer := time.NewTimer(time.Duration(secs) * time.Second)
	defer timer.Stop()
	var waited int64 // seconds past the runtime waited already
	retried := false
	for {
		select {
		case <-stop:
			return nil
		case <-chld:
			reap()
		case <-timer.C:
			x, err := extra(dir)
			if errors.Is(err, errEmpty) && !retried {
				retried = true
				timer.Reset(time.Second)
				continue
			}
			if err != nil || x <= waited {
				return nil
			}
			retried = false
			timer.Reset(time.Duration(x-waited) * time.Second)
			waited = x
		}
	}
}

// spareThreads is how many idle threads the deadline makes as it starts,
// beyond those the runtime made for it, so that it never makes one later:
// a sandbox may hold every pid of its limit by then, and a thread the Go
// runtime cannot create is fatal. With GOMAXPROCS 1, a thread runs Go
// code, one waits for signals (os/signal's receiver, which hands its P
// off each time it waits), one keeps the signal mask (locked), one may be
// in a syscall the runtime took the P from (a wait4, a read of "extra", a
// blocking stdin), and the runtime may start one spinning to find work as
// another leaves: 2 over that.
const spareThreads = 4

// startThreads makes n more threads for the runtime and leaves them idle:
// a goroutine locked to its thread keeps that thread while it waits, so
// each of n such goroutines runs on a thread of its own, one the runtime
// makes while the others wait; unlocked as they end, the threads go idle
// and the runtime keeps them (it never ends an idle thread) for its
// later needs.
func startThreads(n int) {
	locked := make(chan struct{})
	release := make(chan struct{})
	done := make(chan struct{})
	for range n {
		go func() {
			runtime.LockOSThread()
			locked <- struct{}{}
			<-release
			runtime.UnlockOSThread()
			done <- struct{}{}
		}()
	}
	for range n {
		<-locked
	}
	close(release)
	for range n {
		<-done
	}
}

// threads is how many threads this process has (/proc/self/status).
func threads() (int, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for l := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(l, []byte("Threads:")); ok {
			return strconv.Atoi(string(bytes.TrimSpace(v)))
		}
	}
	return 0, errors.New("no Threads line in /proc/self/status")
}

// capTasks sets this process's RLIMIT_NPROC, soft and hard, to n: the
// kernel then refuses it a thread (or process) while its uid holds n
// tasks. Its uid is its own, so they are its threads. Without
// CAP_SYS_RESOURCE it cannot raise it again.
func capTasks(n uint64) error {
	if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: n, Max: n}); err != nil {
		return fmt.Errorf("cap the tasks at %d (RLIMIT_NPROC): %w", n, err)
	}
	return nil
}

// reap waits for every child that has ended, without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}

type line struct {
	text string
	err  error
}

// readLine reads one line of at most 32 bytes, byte by byte: nothing past
// it is consumed.
func readLine(r io.Reader) line {
	var buf []byte
	var b [1]byte
	for len(buf) < 32 {
		n, err := r.Read(b[:])
		if n == 1 {
			if b[0] == '\n' {
				return line{text: string(buf)}
			}
			buf = append(buf, b[0])
			continue
		}
		if err == io.EOF && len(buf) > 0 {
			return line{err: io.ErrUnexpectedEOF}
		}
		if err != nil {
			return line{err: err}
		}
	}
	return line{err: fmt.Errorf("a line longer than %d bytes", len(buf))}
}

func parseSecs(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > maxSecs {
		return 0, fmt.Errorf("%q is not a number of seconds from 0 to %d", s, int64(maxSecs))
	}
	return n, nil
}

// errEmpty is an "extra" not there yet, or being rewritten.
var errEmpty = errors.New("extra is empty")

// extra is the extension SetTimeout left in dir: an error unless dir is a
// directory of uid 0's (the sandbox's uid is never 0, and it cannot
// replace uid 0's) holding "extra", a number of seconds on its first line.
func extra(dir string) (int64, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || st.Uid != 0 {
		return 0, fmt.Errorf("%s is not a directory of uid 0", dir)
	}
	f, err := os.OpenFile(filepath.Join(dir, "extra"), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, errEmpty
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var b [32]byte
	n, err := io.ReadFull(f, b[:])
	if n == 0 {
		if err == io.EOF {
			return 0, errEmpty
		}
		return 0, err
	}
	text, _, _ := bytes.Cut(b[:n], []byte("\n"))
	return parseSecs(string(text))
}

// writeEnviron writes this process's environment to path, whole or not
// at all (a temporary file renamed), readable by everyone.
func writeEnviron(path string) error {
	var b []byte
	for _, kv := range os.Environ() {
		b = append(append(b, kv...), 0)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o444)
	if err != nil {
		return fmt.Errorf("environment copy: %w", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("environment copy: %w", err)
	}
	return nil
}

// pollableStdin is stdin made non-blocking, so that a read waits in the
// runtime's poller rather than holding a thread of its own: the deadline's
// threads count against the sandbox's pids limit (one fewer while the
// warm pool's container waits for its runtime). Stdin as it was when it
// cannot be.
func pollableStdin() *os.File {
	if err := syscall.SetNonblock(0, true); err != nil {
		return os.Stdin
	}
	return os.NewFile(0, "/dev/stdin")
}
