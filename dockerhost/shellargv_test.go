package dockerhost

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/shell"
	"github.com/hostgate/hostgate/internal/testenv"
)

// TestShellArgvExitCodes: a command docker exec runs (shellArgv) exits as
// it does under Host.Exec's command line (shell.CommandLine) in the same
// shell, with the same stdout and stderr: 127 for a program not found or
// a missing cwd, 126 for one not executable, the shell's message on
// stderr. Run directly, docker exec answered 126 for each, runc's message
// on stdout. The shell's own PWD, OLDPWD and SHLVL are not the command's,
// unless its env sets them.
func TestShellArgvExitCodes(t *testing.T) {
	bb, err := exec.LookPath("busybox")
	// Containers run busybox's ash: never drop it silently.
	testenv.RequirePeer(t, "busybox", err == nil)
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=/usr/bin:/bin"}
	run := func(argv []string) (string, string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// docker exec starts argv[0] itself: here busybox's sh, as the
		// test image's /bin/sh is.
		cmd := exec.CommandContext(ctx, bb, argv...)
		cmd.Dir, cmd.Env = "/", env
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("run %q: %v", argv, err)
		}
		return o.String(), e.String(), cmd.ProcessState.ExitCode()
	}
	for _, tc := range []struct {
		argv   []string
		dir    string
		code   int
		stderr string
	}{
		{[]string{"nonexist"}, "/", 127, "nonexist: not found"},
		{[]string{plain}, "/", 126, plain + ": Permission denied"},
		{[]string{dir + "/missing"}, "/", 127, dir + "/missing: not found"},
		{[]string{"true"}, dir + "/nonexist", 127, "can't cd to " + dir + "/nonexist"},
		{[]string{"sh", "-c", "exit 3"}, dir, 3, ""},
		// exec took these for its options: 2 "illegal option -l", and
		// "--" ran echo.
		{[]string{"-l"}, "/", 127, "sh: line 0: -l: not found"},
		{[]string{"--", "echo", "ran"}, "/", 127, "sh: line 0: --: not found"},
	} {
		argv := shellArgv(tc.argv, tc.dir, nil)
		if argv[0] != "/bin/sh" {
			t.Fatalf("shellArgv = %q, want the image's /bin/sh", argv)
		}
		out, stderr, code := run(append([]string{"sh"}, argv[1:]...))
		if code != tc.code || out != "" || !strings.Contains(stderr, tc.stderr) || (tc.stderr == "") != (stderr == "") {
			t.Errorf("%q in %s: exit %d %q %q, want %d and %q in stderr", tc.argv, tc.dir, code, out, stderr, tc.code, tc.stderr)
		}
		line, err := shell.CommandLine(tc.argv, tc.dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		hout, herr, hcode := run([]string{"sh", "-c", line})
		if strings.HasPrefix(tc.argv[0], "-") {
			// Such a program is run as a plain command (shell.Exec), and
			// busybox's message for one that is not found names the line
			// only when sh -c was given $0, as shellArgv gives it.
			herr = strings.Replace(herr, "sh: ", "sh: line 0: ", 1)
		}
		if hout != out || herr != stderr || hcode != code {
			t.Errorf("%q in %s: exit %d %q %q; Host.Exec's command line: %d %q %q", tc.argv, tc.dir, code, out, stderr, hcode, hout, herr)
		}
	}
	// The command's environment is what docker exec gave the shell.
	out, _, _ := run(append([]string{"sh"}, shellArgv([]string{"env"}, dir, nil)[1:]...))
	if got := strings.Split(strings.TrimSpace(out), "\n"); !slices.Equal(got, env) {
		t.Errorf("environment %q, want %q", got, env)
	}
	if argv := shellArgv([]string{"env"}, dir, map[string]string{"SHLVL": "2"}); strings.Contains(argv[2], "unset SHLVL") || !strings.Contains(argv[2], "unset PWD") {
		t.Errorf("a command whose env sets SHLVL: %q, want only the others unset", argv[2])
	}
}
