// Package deadline is a sandbox container's in-container runtime limit
// kept by the tools volume's agent as the container's PID 1 (see
// dockerhost: LabelDeadline, Config.DeadlineTool).
//
// It replaces a shell script under docker-init that ran, with its sleep,
// as the sandbox's own uid: sandbox code could stop it (kill -STOP -1
// kept the container past its deadline while no gateway ran) or kill it
// (killall sleep, kill -9 -1 ended the sandbox at once). The kernel
// delivers no signal from inside a PID namespace to its init unless the
// init handles it, and never SIGKILL or SIGSTOP; the agent binary is
// execute-only (mode 0111), so the kernel makes it non-dumpable and no
// process of the same uid can ptrace it or open its /proc files.
package deadline

import (
	"fmt"
	"io"
	"os"
	"runtime"
)

// Arg, as the agent binary's first argument, makes it the deadline
// instead of an agent: `agent __hostgate_deadline SECS`, or `-` for SECS
// to read them as one line from stdin (the warm pool's containers wait
// for their claim). It is not a user command.
const Arg = "__hostgate_deadline"

// Dir is where SetTimeout leaves the extension of the deadline: a
// directory of /dev/shm (mode 1777) that uid 0 makes, through docker
// exec, so that no sandbox process (its own uid, no capability) can
// write in it, replace it or remove it. Its file "extra" holds how many
// seconds past the runtime the deadline is.
const Dir = "/dev/shm/.hostgate"

// InitEnvironFile is where the deadline leaves a copy of its environment,
// as /proc/1/environ holds it (NUL-terminated entries): the environment
// every process of the container starts with, which the gateway reads to
// give commands what docker exec would. /proc/1/environ itself is not
// readable when PID 1 is the non-dumpable deadline. It is in InitDir, a
// tmpfs of PID 1's own uid (dockerhost mounts it), which no sandbox
// process can write in: sandbox code cannot change what the gateway's
// commands start with.
const InitEnvironFile = InitDir + "/environ"

// InitDir is PID 1's own directory, a tmpfs of its uid: see
// InitEnvironFile.
const InitDir = "/run/hostgate"

// EnvironFile is where a deadline whose container lacks InitDir leaves
// its environment copy, as containers made before InitDir did (PID 1 of
// the sandbox's own uid, which may replace the file).
const EnvironFile = "/dev/shm/.hostgate-environ"

// environFile is where this PID 1 leaves its environment copy.
func environFile() string {
	if fi, err := os.Stat(InitDir); err == nil && fi.IsDir() {
		return InitEnvironFile
	}
	return EnvironFile
}

// MaybeRun runs the deadline and exits when the process was started as
// one (os.Args[1] == Arg); otherwise it returns at once. The agent's
// main calls it first thing.
func MaybeRun() {
	if len(os.Args) < 2 || os.Args[1] != Arg {
		return
	}
	environ := environFile()
	// Only where PID 1 has a uid of its own: a cap on a uid the sandbox's
	// processes share would count theirs, and PID 1 could not make its
	// threads.
	os.Exit(run(os.Args[2:], environ, Dir, environ == InitEnvironFile))
}

// MaxTasks is the most tasks (threads) PID 1 holds when it has a uid of
// its own: it caps its uid's RLIMIT_NPROC at it once it has started, so
// the kernel refuses it a task more, and dockerhost leaves this many of
// the pids limit out of the sandbox uid's nproc ulimit for it. It makes 9
// as it starts, in a sandbox idle and at most under a fork bomb that holds
// every pid (dockerhost's TestEngine/DeadlineToolForkBomb samples them),
// and none after (TestNoThreadAfterStart); 3 more are the margin for a Go
// runtime that starts with more (the race detector's makes 10 or 11).
//
// The cap comes after the start, not before: how many threads the runtime
// makes while it starts depends on the machine's load (a thread that
// loses its CPU in a system call has its P handed to a new one), and
// capped before, a start that wanted a 13th thread was fatal and ended
// the sandbox as it was made (1 start in 17 of the test binary with three
// busy loops on 2 cores). Nothing else runs in the sandbox while PID 1
// starts, so the threads it makes then take no pid from anyone yet; it
// says so on stderr when it made more than MaxTasks.
const MaxTasks = 12

// maxTasks is MaxTasks; a test's hook.
var maxTasks = MaxTasks

// run is the deadline process with its paths: its exit code. capped caps
// its tasks at MaxTasks.
func run(args []string, environ, dir string, capped bool) int {
	var started func() error
	if capped {
		started = func() error { return capTasks(uint64(maxTasks)) }
	}
	runtime.GOMAXPROCS(1)
	if err := writeEnviron(environ); err != nil {
		// Not fatal: the gateway then runs commands with docker exec.
		fmt.Fprintf(os.Stderr, "agent %s: %v\n", Arg, err)
	}
	var stdin io.Reader = os.Stdin
	if len(args) == 1 && args[0] == "-" {
		// Only then: an os.File of fd 0 that nothing reads would close it
		// when collected.
		stdin = pollableStdin()
	}
	if err := keep(args, stdin, dir, started); err != nil {
		fmt.Fprintf(os.Stderr, "agent %s: %v\n", Arg, err)
		return 2
	}
	return 0
}
