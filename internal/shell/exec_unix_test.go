//go:build unix

package shell

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// shells are the shells a command line meets: dash (Debian's /bin/sh),
// bash, and busybox's ash (the sandbox image's /bin/sh), each as argv
// before "-c".
func shells(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, name := range []string{"dash", "bash", "busybox"} {
		path, err := exec.LookPath(name)
		// Each parses exec's words its own way: never drop one silently.
		testenv.RequirePeer(t, name, err == nil)
		out[name] = []string{path}
		if name == "busybox" {
			out[name] = []string{path, "sh"}
		}
	}
	return out
}

// runSh runs sh -c script with args in / with env, as sshd and docker exec
// start it.
func runSh(t *testing.T, sh []string, env []string, script string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sh[0], append(append(sh[1:len(sh):len(sh)], "-c", script), args...)...)
	cmd.Dir, cmd.Env = "/", env
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s -c %q: %v", sh, script, err)
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

// TestExecDashProgram: a program whose name starts with '-' is looked up
// and run as a program in dash, bash and busybox ash, as OpenSSH runs the
// quoted word ('-l' through sshd's sh -c): not found exits 127 with the
// shell's "not found", found it runs with its arguments. `exec -l` was
// exec's option in bash (exit 0, nothing run) and busybox ash (exit 2,
// "illegal option -l"), and a command "--" ran its first argument there;
// `exec -- -l` is no fix, dash running a program named "--".
func TestExecDashProgram(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "-x")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho \"ran|$1|$2\"\nexit 5\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + dir + ":/usr/bin:/bin"}
	for name, sh := range shells(t) {
		for _, tc := range []struct {
			argv   []string
			dir    string
			code   int
			stdout string
			stderr []string // parts of it
		}{
			{[]string{"-l"}, "", 127, "", []string{"-l: ", "not found"}},
			{[]string{"-l"}, "/tmp", 127, "", []string{"-l: ", "not found"}},
			{[]string{"--", "echo", "ran"}, "", 127, "", []string{"--: ", "not found"}},
			{[]string{"-c", "echo ran"}, "", 127, "", []string{"-c: ", "not found"}},
			{[]string{"-x'", "a"}, "", 127, "", []string{"-x': ", "not found"}},
			{[]string{"-x", "a b", "$HOME"}, "", 5, "ran|a b|$HOME\n", nil},
			{[]string{"-x", "a"}, "/tmp", 5, "ran|a|\n", nil},
			{[]string{"echo", "-l"}, "", 0, "-l\n", nil},
		} {
			line, err := CommandLine(tc.argv, tc.dir, map[string]string{"V": "1"})
			if err != nil {
				t.Fatal(err)
			}
			bare, err := CommandLine(tc.argv, tc.dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			script := `cd "$1" || exit 127; shift; ` + ExecArgs(tc.argv[0])
			cwd := tc.dir
			if cwd == "" {
				cwd = "/"
			}
			for way, run := range map[string]func() (string, string, int){
				"CommandLine":         func() (string, string, int) { return runSh(t, sh, env, line) },
				"CommandLine, no env": func() (string, string, int) { return runSh(t, sh, env, bare) },
				`ExecArgs ("$@")`: func() (string, string, int) {
					return runSh(t, sh, env, script, append([]string{"sh", cwd}, tc.argv...)...)
				},
			} {
				out, stderr, code := run()
				ok := code == tc.code && out == tc.stdout && (len(tc.stderr) == 0) == (stderr == "")
				for _, part := range tc.stderr {
					ok = ok && strings.Contains(stderr, part)
				}
				if !ok {
					t.Errorf("%s, %s %q in %q: exit %d %q %q; want %d %q and %q in stderr", name, way, tc.argv, tc.dir, code, out, stderr, tc.code, tc.stdout, tc.stderr)
				}
			}
		}
	}
	// The usual command keeps exec: the shell's process becomes the
	// program's, no fork, its exit status and signal its own.
	if got := Exec([]string{"true", "-l"}); got != "exec true -l" {
		t.Errorf("Exec(true -l) = %q, want exec true -l", got)
	}
	if got := ExecArgs("true"); got != `exec "$@"` {
		t.Errorf("ExecArgs(true) = %q, want exec \"$@\"", got)
	}
}

// TestCommandLineDashDir: a relative working directory, its name starting
// with '-' or not, is that directory in dash, bash and busybox ash, with a
// CDPATH in the environment too. `cd -P` was cd's
// option and went to $HOME, `cd -` went to $OLDPWD and printed it on the
// command's stdout, and `cd -x` failed with "illegal option" (exit 127).
func TestCommandLineDashDir(t *testing.T) {
	parent := t.TempDir()
	for _, d := range []string{"-P", "-", "-x", "-x y", "--"} {
		if err := os.Mkdir(filepath.Join(parent, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A CDPATH with a directory of the same name elsewhere: cd took that
	// one first, and printed it on the command's stdout.
	other := t.TempDir()
	for _, d := range []string{"-P", "-", "-x", "-x y", "--", "sub"} {
		if err := os.Mkdir(filepath.Join(other, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(parent, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=/usr/bin:/bin", "HOME=/", "OLDPWD=/", "CDPATH=" + other}
	for name, sh := range shells(t) {
		for _, d := range []string{"-P", "-", "-x", "-x y", "--", "sub"} {
			line, err := CommandLine([]string{"pwd"}, d, nil)
			if err != nil {
				t.Fatal(err)
			}
			out, stderr, code := runSh(t, sh, env, "cd "+Quote(parent)+" || exit 1; "+line)
			if want := filepath.Join(parent, d) + "\n"; code != 0 || out != want || stderr != "" {
				t.Errorf("%s: %q in dir %q: exit %d, stdout %q, stderr %q; want exit 0 and %q", name, line, d, code, out, stderr, want)
			}
		}
	}
}
