// Package shell builds POSIX shell command lines: quoting words so /bin/sh
// reads them back unchanged, validating variable names, and the one-line
// "cd; export; exec" form every remote command is sent as.
package shell

import (
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// Quote returns s as one shell word that /bin/sh reads back byte for byte.
// Words made only of safe characters are left bare for readability.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for i := 0; i < len(s); i++ {
		if !IsSafe(s[i]) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// IsSafe reports whether Quote leaves c unquoted.
func IsSafe(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("@%+=:,./-_", c) >= 0
}

// Join quotes every word of argv and joins them with spaces.
func Join(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = Quote(a)
	}
	return strings.Join(q, " ")
}

// ValidName reports whether name is a valid shell variable name.
func ValidName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// ErrNUL is the error of a command line that would carry a NUL byte. SSH
// strings may hold one, but OpenSSH's sshd takes it for a protocol error
// and drops the whole connection, with every process and forward on it;
// no shell or execve could pass it on anyway. It is an fs.ErrInvalid.
var ErrNUL = fmt.Errorf("shell: a command line cannot carry a NUL byte (pass binary data on stdin): %w", fs.ErrInvalid)

// CdOperand is dir as cd's operand, the directory of that name: cd takes
// a first word starting with '-' for an option ("-P" went to $HOME, "-x"
// failed), "-" for $OLDPWD, and a relative name from CDPATH when the
// host's environment has one, the last two printed on the command's
// stdout. A relative dir is written "./dir", unless its first element is
// "." or "..", where CDPATH does not apply (and which sshlayer's
// parseCommandLine reads back as written).
func CdOperand(dir string) string {
	if first, _, _ := strings.Cut(dir, "/"); first != "" && first != "." && first != ".." {
		return "./" + dir
	}
	return dir
}

// CommandLine is the one remote shell command line a process is started
// with: cd to dir (when set; "./dir" when relative), export each variable (sorted by name), then
// exec argv with every word quoted. It fails on an invalid variable name,
// a NUL byte (ErrNUL) or an empty argv.
func CommandLine(argv []string, dir string, env map[string]string) (string, error) {
	if len(argv) == 0 {
		return "", fmt.Errorf("shell: empty argv")
	}
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return "", fmt.Errorf("argument %d: %w", i, ErrNUL)
		}
	}
	if strings.IndexByte(dir, 0) >= 0 {
		return "", fmt.Errorf("working directory: %w", ErrNUL)
	}
	for k, v := range env {
		if strings.IndexByte(v, 0) >= 0 {
			return "", fmt.Errorf("environment variable %s: %w", k, ErrNUL)
		}
	}
	var b strings.Builder
	if dir != "" {
		b.WriteString("cd ")
		b.WriteString(Quote(CdOperand(dir)))
		b.WriteString(" || exit 127; ")
	}
	names := make([]string, 0, len(env))
	for k := range env {
		if !ValidName(k) {
			return "", fmt.Errorf("shell: environment variable name %q is not a valid shell name ([A-Za-z_][A-Za-z0-9_]*)", k)
		}
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		b.WriteString("export ")
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(Quote(env[k]))
		b.WriteString("; ")
	}
	b.WriteString(Exec(argv))
	return b.String(), nil
}

// Exec is the end of a command line that hands the shell's process to
// argv, every word quoted: "exec ARGV", so that the command's exit status
// and signal are its own. A program whose name starts with '-' is run as
// a plain command instead, its name always quoted: bash and busybox ash
// take exec's first word for an option (bash's "exec -l" does nothing and
// exits 0, ash's answers 2 "illegal option"; a first word "--" ran the
// next one), and POSIX does not promise that exec takes "--" (dash runs a
// program named "--"), whereas a command's name is never an option in any
// shell. bash and busybox ash still exec such a last command without a
// fork, dash forks it and exits with its status (128+N when a signal
// killed it). The quotes keep a line that starts with the name from
// reading as the shell's own option (sh -c -l: "-c requires an argument").
func Exec(argv []string) string {
	if len(argv) == 0 || !strings.HasPrefix(argv[0], "-") {
		return "exec " + Join(argv)
	}
	first := "'" + strings.ReplaceAll(argv[0], "'", `'\''`) + "'"
	if len(argv) == 1 {
		return first
	}
	return first + " " + Join(argv[1:])
}

// ExecArgs is Exec for a script whose arguments ("$@") are the command,
// program the first of them: `exec "$@"`, or `"$@"` when program starts
// with '-'.
func ExecArgs(program string) string {
	if strings.HasPrefix(program, "-") {
		return `"$@"`
	}
	return `exec "$@"`
}
