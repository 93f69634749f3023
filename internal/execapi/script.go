package execapi

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hostgate/hostgate/internal/shell"
	"github.com/hostgate/hostgate/internal/textcut"
)

// maxEnviron bounds the agent's /proc/self/environ the gateway reads (the
// kernel allows a few MiB; a container's is a few hundred bytes).
const maxEnviron = 256 << 10

// errEnvironName means the container's environment has a variable a POSIX
// shell cannot export: the tunnel cannot reproduce it, so docker exec runs
// that execution's commands.
var errEnvironName = errors.New("execapi: the container environment has a name a shell cannot export")

// errNoEnviron means the container's environment could not be read or
// reproduced, so the tunnel does not run that execution's commands.
var errNoEnviron = errors.New("execapi: no reproducible container environment")

// parseEnviron parses a NUL-separated environment block (/proc/PID/environ)
// into NAME=value entries in order, the last of a repeated name winning as
// execve's consumers see it.
func parseEnviron(b []byte) ([]string, error) {
	if len(b) > maxEnviron {
		return nil, fmt.Errorf("execapi: environment over %d bytes", maxEnviron)
	}
	var out []string
	index := map[string]int{}
	for len(b) > 0 {
		var kv []byte
		kv, b, _ = bytes.Cut(b, []byte{0})
		if len(kv) == 0 {
			continue
		}
		name, _, ok := bytes.Cut(kv, []byte{'='})
		if !ok || !shell.ValidName(string(name)) {
			return nil, fmt.Errorf("%w: %q", errEnvironName, textcut.Cut(string(name), 64))
		}
		if i, seen := index[string(name)]; seen {
			out[i] = string(kv)
			continue
		}
		index[string(name)] = len(out)
		out = append(out, string(kv))
	}
	return out, nil
}

// serverEnv are the names the agent's SSH server or the shell it runs may
// put in a command's environment beyond the container's own (sshlayer's
// base environment, SSH_*, the shell's SHLVL, PWD, OLDPWD): the script
// unsets them before it exports the environment docker exec would give.
var serverEnv = []string{"PATH", "HOME", "SHELL", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ",
	"SSH_CONNECTION", "SSH_CLIENT", "SSH_TTY", "TERM", "SHLVL", "PWD", "OLDPWD"}

// ociPrefix starts the message docker exec prints (on stdout, with exit
// code 126) when runc cannot start a command.
const ociPrefix = "OCI runtime exec failed: exec failed: unable to start container process: "

// commandScript is the `sh -c` line that runs argv in a container whose
// environment is base, as Host.Exec's command line (shell.CommandLine)
// does: `cd DIR || exit 127`, exactly base overridden by env (the agent's
// and the shell's own variables removed), then `exec ARGV` (shell.Exec: a
// program named "-l" runs as a plain command, which exec would take for
// its option), so that its exit status and signal are the command's own. A program the shell cannot
// find exits 127, one it cannot execute 126, a missing cwd 127, each with
// the shell's own message on stderr: what the same command gives over SSH
// (Host.Exec) and through docker exec (dockerhost wraps its argv in the
// same shell), not runc's 126 on stdout. One line, as Host.Exec's, so the
// shell's messages name the same line. Every word is quoted.
func commandScript(base []string, argv []string, env map[string]string, dir string) (string, error) {
	if len(argv) == 0 || argv[0] == "" {
		return "", errors.New("execapi: empty command")
	}
	if !strings.HasPrefix(dir, "/") {
		return "", fmt.Errorf("execapi: cwd %q is not absolute", dir)
	}
	q := shell.Quote
	var b strings.Builder
	// cd first: it sets PWD and OLDPWD, which are unset below.
	fmt.Fprintf(&b, "cd %s || exit 127; ", q(dir))
	b.WriteString("unset " + strings.Join(serverEnv, " ") + "; ")
	final := slices.Clone(base)
	names := make([]string, 0, len(env))
	for k := range env {
		if !shell.ValidName(k) {
			return "", fmt.Errorf("execapi: environment variable name %q is not a valid shell name", k)
		}
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		kv := k + "=" + env[k]
		if i := slices.IndexFunc(final, func(e string) bool { return strings.HasPrefix(e, k+"=") }); i >= 0 {
			final[i] = kv
		} else {
			final = append(final, kv)
		}
	}
	for _, kv := range final {
		k, v, _ := strings.Cut(kv, "=")
		if !shell.ValidName(k) {
			return "", fmt.Errorf("%w: %q", errEnvironName, textcut.Cut(k, 64))
		}
		fmt.Fprintf(&b, "export %s=%s; ", k, q(v))
	}
	b.WriteString(shell.Exec(argv))
	return b.String(), nil
}

// linuxSignals are the numbers of the signals an SSH server names (RFC
// 4254 §6.10's, and the system's own names without "SIG", which sshlayer's
// server and others send for the rest: XCPU from ulimit -t, XFSZ from
// ulimit -f, SYS from seccomp), on Linux, where containers run: a command
// a signal killed exits 128+N, as docker exec reports it. IOT, POLL and
// CLD are other names of ABRT, IO and CHLD.
var linuxSignals = map[string]int{
	"HUP": 1, "INT": 2, "QUIT": 3, "ILL": 4, "TRAP": 5, "ABRT": 6, "IOT": 6, "BUS": 7,
	"FPE": 8, "KILL": 9, "USR1": 10, "SEGV": 11, "USR2": 12, "PIPE": 13, "ALRM": 14,
	"TERM": 15, "STKFLT": 16, "CHLD": 17, "CLD": 17, "CONT": 18, "STOP": 19, "TSTP": 20,
	"TTIN": 21, "TTOU": 22, "URG": 23, "XCPU": 24, "XFSZ": 25, "VTALRM": 26, "PROF": 27,
	"WINCH": 28, "IO": 29, "POLL": 29, "PWR": 30, "SYS": 31,
}

// signalExit is the exit code a command killed by the signal SSH names
// name reports: 128+N, as a shell and docker exec say it.
func signalExit(name string) (int, error) {
	if n, ok := linuxSignals[name]; ok {
		return 128 + n, nil
	}
	return -1, fmt.Errorf("execapi: command killed by unknown signal %q", name)
}
