//go:build linux

package deadline

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
	"golang.org/x/sys/unix"
)

// helperArg, as the test binary's first argument, makes it a deadline
// process (run) with its environment copy at $HOSTGATE_TEST_ENVIRON: the
// deadline as the sandbox's PID 1 runs it, outside a container.
const helperArg = "__hostgate_deadline_test"

// prlimitArg makes the test binary set the RLIMIT_NPROC of process
// os.Args[2] to os.Args[3]: run as that process's uid, which may lower
// it without CAP_SYS_RESOURCE (which test machines may lack).
const prlimitArg = "__hostgate_prlimit_test"

func init() {
	if len(os.Args) > 1 && os.Args[1] == helperArg {
		if n, err := strconv.Atoi(os.Getenv("HOSTGATE_TEST_MAXTASKS")); err == nil {
			maxTasks = n
		}
		os.Exit(run(os.Args[2:], os.Getenv("HOSTGATE_TEST_ENVIRON"), os.Getenv("HOSTGATE_TEST_DIR"), os.Getenv("HOSTGATE_TEST_CAPPED") == "1"))
	}
	if len(os.Args) == 4 && os.Args[1] == prlimitArg {
		pid, _ := strconv.Atoi(os.Args[2])
		n, _ := strconv.ParseUint(os.Args[3], 10, 64)
		if err := unix.Prlimit(pid, unix.RLIMIT_NPROC, &unix.Rlimit{Cur: n, Max: n}, nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// threadsOf is the number of threads of process pid.
func threadsOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no Threads in /proc/%d/status", pid)
	return 0
}

// TestNoThreadAfterStart: the deadline makes every thread it needs as it
// starts, and never another: a sandbox's code that holds every pid of its
// pids limit (a fork bomb) left none for a thread the Go runtime needed
// later, which is fatal ("runtime: failed to create new OS thread (have 6
// already; errno=11)", from the signal goroutine's wait handing its P
// off), and the sandbox ended at once, long before its deadline: 2 of 3
// containers under a bomb whose orphans PID 1 reaped, within 20 s. Here
// the kernel's RLIMIT_NPROC stands for the full pids limit: the process
// runs as a uid of its own, its limit set to the threads it has once
// started, and a flood of SIGCHLD (every orphan's end) and of ignored
// signals wakes it as the bomb's reaping did.
func TestNoThreadAfterStart(t *testing.T) {
	d := startDeadline(t, false)
	threads, pid, bin, uid, exited, stderr := d.threads, d.pid, d.bin, d.uid, d.exited, d.stderr
	cred := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	set := exec.Command(bin, prlimitArg, strconv.Itoa(pid), strconv.Itoa(threads))
	set.SysProcAttr = cred
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("prlimit: %v: %s", err, out)
	}

	flood := time.Now().Add(5 * time.Second)
	for i := 0; time.Now().Before(flood); i++ {
		sig := syscall.SIGCHLD
		if i%4 == 3 {
			sig = syscall.SIGUSR1 // ignored, but through the handler
		}
		died := syscall.Kill(pid, sig) != nil
		if i%64 == 0 || died {
			select {
			case err := <-exited:
				exited <- err
				t.Fatalf("the deadline ended under the signals, with %d threads and no room for another: %v\n%s", threads, err, lastLines(stderr.String(), 6))
			case <-time.After(time.Millisecond):
			}
		}
	}
	if n := threadsOf(t, pid); n != threads {
		t.Errorf("threads %d after the signals, %d before", n, threads)
	}
	t.Logf("the deadline's threads: %d", threads)
	// Still the deadline: SIGTERM (docker stop) ends it, cleanly.
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("after SIGTERM: %v\n%s", err, lastLines(stderr.String(), 6))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("SIGTERM did not end the deadline")
	}
}

// deadlineProc is a deadline process of the test binary (run) under a
// uid of its own.
type deadlineProc struct {
	pid, threads int // threads once started
	bin          string
	uid          uint32
	exited       chan error // gets Wait's error, once
	stderr       *bytes.Buffer
}

// startDeadline starts the deadline as a uid nothing else runs as, capped
// (run's capped) or not, and waits until it started.
func startDeadline(t *testing.T, capped bool, env ...string) *deadlineProc {
	t.Helper()
	testenv.RequirePeer(t, "root (to run the deadline as a uid of its own)", os.Geteuid() == 0)
	// A directory and binary another uid may run.
	dir, err := os.MkdirTemp("", "deadline-threads-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "deadline.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	shm := filepath.Join(dir, "shm")
	if err := os.Mkdir(shm, 0o1777); err != nil || os.Chmod(shm, 0o1777) != nil {
		t.Fatal(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	// A uid nothing else runs as (below the sandbox range), so that
	// RLIMIT_NPROC counts this process's threads alone.
	uid := uint32(1_900_000_000 + binary.LittleEndian.Uint32(b[:])%1_000_000)
	cmd := exec.Command(bin, helperArg, "600")
	cmd.Env = []string{"HOSTGATE_TEST_ENVIRON=" + filepath.Join(shm, "environ"), "HOSTGATE_TEST_DIR=" + filepath.Join(shm, "none")}
	if capped {
		cmd.Env = append(cmd.Env, "HOSTGATE_TEST_CAPPED=1")
	}
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	pid := cmd.Process.Pid

	// Started: the environment copy is written before Run, whose threads
	// are made before it waits; then their number stays.
	until := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(shm, "environ")); err == nil {
			break
		}
		if time.Now().After(until) {
			t.Fatalf("the deadline never started: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	return &deadlineProc{pid: pid, threads: threadsOf(t, pid), bin: bin, uid: uid, exited: exited, stderr: &stderr}
}

// TestTasksCapped: the deadline with a uid of its own caps the tasks it
// may hold at MaxTasks, soft and hard (RLIMIT_NPROC), as it starts: what
// dockerhost leaves out of the sandbox's nproc ulimit for it is then
// enough by the kernel's word. It set none: it kept the sandbox's own
// (the pids limit less 12 at most), and a thread more than 12 would have
// taken a pid the agent's threads were kept.
func TestTasksCapped(t *testing.T) {
	// A loaded machine may make a start take a thread or two more (see
	// MaxTasks): what MaxTasks must cover is a start on a machine that
	// lets it run, so of three starts one must stay within it.
	d := startDeadline(t, true)
	for try := 1; d.threads > MaxTasks && try < 3; try++ {
		t.Logf("start %d made %d threads, over MaxTasks %d: again", try, d.threads, MaxTasks)
		d = startDeadline(t, true)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(d.pid) + "/limits")
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^Max processes +` + strconv.Itoa(MaxTasks) + ` +` + strconv.Itoa(MaxTasks) + ` +processes`)
	if !want.Match(b) {
		t.Fatalf("the deadline's limits:\n%s\nwant Max processes %d %d", b, MaxTasks, MaxTasks)
	}
	if d.threads > MaxTasks {
		t.Fatalf("the deadline started %d threads, over MaxTasks %d", d.threads, MaxTasks)
	}
	t.Logf("the deadline's threads, capped at %d: %d", MaxTasks, d.threads)
	select {
	case err := <-d.exited:
		d.exited <- err
		t.Fatalf("the capped deadline ended: %v\n%s", err, d.stderr.String())
	default:
	}
}

// TestTasksCappedOnceStarted: the cap comes once the deadline has made
// its threads, so a start that makes more than the cap (a loaded machine:
// a thread that loses its CPU in a system call has its P handed to a new
// one) goes on, capped, and says so. Capped before its start, under load
// 1 start in 17 wanted a 13th thread and the deadline died (fatal error:
// newosproc), ending the sandbox as it was made. Here the cap is set
// below what any start makes, 4, which fails every start so capped.
func TestTasksCappedOnceStarted(t *testing.T) {
	d := startDeadline(t, true, "HOSTGATE_TEST_MAXTASKS=4")
	b, err := os.ReadFile("/proc/" + strconv.Itoa(d.pid) + "/limits")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^Max processes +4 +4 +processes`).Match(b) {
		t.Fatalf("the deadline's limits:\n%s\nwant Max processes 4 4", b)
	}
	// Still the deadline: SIGTERM (docker stop) ends it, cleanly.
	if err := syscall.Kill(d.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.exited:
		d.exited <- err
		if err != nil {
			t.Fatalf("after SIGTERM: %v\n%s", err, lastLines(d.stderr.String(), 6))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("SIGTERM did not end the deadline")
	}
	// Read once it ended: Wait copied the last of it.
	if want := fmt.Sprintf("started with %d threads, %d over the 4", d.threads, d.threads-4); !strings.Contains(d.stderr.String(), want) {
		t.Errorf("stderr %q does not say %q", d.stderr.String(), want)
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[:min(len(l), n)], "\n")
}
