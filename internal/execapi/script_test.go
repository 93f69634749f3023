package execapi

import (
	"context"
	"errors"
	"github.com/hostgate/hostgate/internal/shell"
	"github.com/hostgate/hostgate/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseEnviron(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  error
	}{
		{"", nil, nil},
		{"A=1\x00B=\x00C=x=y\x00", []string{"A=1", "B=", "C=x=y"}, nil},
		{"A=1\x00\x00A=2", []string{"A=2"}, nil}, // the last wins, in the first's place
		{"A=1\x00B-C=2\x00", nil, errEnvironName},
		{"NOEQUALS\x00", nil, errEnvironName},
		{"=x\x00", nil, errEnvironName},
		{"1A=x\x00", nil, errEnvironName},
	} {
		got, err := parseEnviron([]byte(tc.in))
		if !errors.Is(err, tc.err) || !slices.Equal(got, tc.want) {
			t.Errorf("parseEnviron(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
	if _, err := parseEnviron(make([]byte, maxEnviron+1)); err == nil {
		t.Error("an environment over maxEnviron was accepted")
	}
	// The error names the first 64 bytes of a long name, cut before the
	// character across that limit, not inside it.
	long := strings.Repeat("A", 63) + "É_B"
	_, err := parseEnviron([]byte(long + "=1\x00"))
	if want := strconv.Quote(long[:63] + "…"); err == nil || !strings.HasSuffix(err.Error(), ": "+want) {
		t.Errorf("parseEnviron of a long name that is not a shell name: %v, want an error naming %s", err, want)
	}
}

// quotedName is the name an errEnvironName error quotes, unquoted.
func quotedName(t *testing.T, err error) string {
	t.Helper()
	// The name follows the sentinel's own text: it may hold ": " itself.
	msg := err.Error()
	quoted, ok := strings.CutPrefix(msg, errEnvironName.Error()+": ")
	name, qerr := strconv.Unquote(quoted)
	if !ok || qerr != nil {
		t.Fatalf("error %q does not end with a quoted name", msg)
	}
	return name
}

func FuzzParseEnviron(f *testing.F) {
	f.Add([]byte("PATH=/bin\x00HOME=/\x00"))
	f.Add([]byte("A=1\x00A=2\x00\x00B"))
	f.Add([]byte(strings.Repeat("A", 62) + "€=1\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := parseEnviron(b)
		if errors.Is(err, errEnvironName) && utf8.Valid(b) {
			// The name is cut for the message, at a character.
			if name := quotedName(t, err); !utf8.ValidString(name) {
				t.Fatalf("error %q: the name is cut inside a character", err)
			}
		}
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, kv := range env {
			k, _, ok := strings.Cut(kv, "=")
			if !ok || seen[k] {
				t.Fatalf("entry %q: no '=' or a repeated name in %q", kv, env)
			}
			seen[k] = true
		}
		// What parses makes a script (nothing a shell cannot export).
		if _, err := commandScript(env, []string{"true"}, nil, "/"); err != nil {
			t.Fatalf("commandScript on a parsed environment: %v", err)
		}
	})
}

// shells are the /bin/sh implementations the script must work with: the
// machine's (dash on Debian) and busybox's ash (the test image's).
func shells(t *testing.T) [][]string {
	_, err := os.Stat("/bin/sh")
	testenv.RequirePeer(t, "/bin/sh", err == nil)
	bb, err := exec.LookPath("busybox")
	// Containers run busybox's ash: never drop it silently.
	testenv.RequirePeer(t, "busybox", err == nil)
	return [][]string{{"/bin/sh"}, {bb, "sh"}}
}

// runScript runs commandScript's line as the agent's server does: `sh -c`
// with the server's own environment (sshlayer's base, an inherited SHLVL
// and PWD), which the script must replace with exactly base+env.
func runScript(t *testing.T, sh []string, base, argv []string, env map[string]string, dir string) (string, int) {
	t.Helper()
	line, err := commandScript(base, argv, env, dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, sh[0], append(sh[1:], "-c", line)...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace", "SHELL=/bin/sh", "USER=nobody", "LOGNAME=nobody", "SHLVL=4", "PWD=/", "LANG=C.UTF-8"}
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %q: %v", line, err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func TestCommandScriptEnvironment(t *testing.T) {
	envBin, err := exec.LookPath("env")
	if err != nil {
		t.Skip("no env binary")
	}
	dir := t.TempDir()
	base := []string{"PATH=/usr/bin:/bin", "HOSTNAME=box", "HOME=/tmp", "FOO=bar", "Q=it's \"$x\" `y`\nz"}
	for _, sh := range shells(t) {
		out, code := runScript(t, sh, base, []string{envBin, "-0"}, map[string]string{"FOO": "baz", "NEW": "a\\b"}, dir)
		got, err := parseEnviron([]byte(out))
		if err != nil || code != 0 {
			t.Fatalf("%s: exit %d, %q: %v", sh, code, out, err)
		}
		want := []string{"PATH=/usr/bin:/bin", "HOSTNAME=box", "HOME=/tmp", "FOO=baz", "Q=it's \"$x\" `y`\nz", "NEW=a\\b"}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: environment\n%q\nwant exactly\n%q", sh, got, want)
		}
	}
}

// TestCommandScriptStart: a command the script runs exits as it does
// under Host.Exec's command line (shell.CommandLine) in the same shell,
// with the same stdout and stderr: 127 for a program not found, 126 for
// one not executable, 127 for a missing cwd, each with the shell's message
// on stderr (it answered runc's 126 on stdout, where Host.Exec said 127).
func TestCommandScriptStart(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"$0|$1|$(pwd)\"\nexit 7\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"PATH=" + dir + ":/usr/bin:/bin"}
	for _, sh := range shells(t) {
		for _, tc := range []struct {
			argv   []string
			dir    string
			code   int
			stdout string
			stderr string // a part of it
		}{
			{[]string{"script", "a b"}, dir, 7, script + "|a b|" + dir + "\n", ""}, // found in PATH; a script's $0 is its path
			{[]string{script, "$x"}, "/", 7, script + "|$x|/\n", ""},
			{[]string{"nonexist"}, "/", 127, "", "nonexist: not found"},
			{[]string{"plain"}, "/", 126, "", "plain: Permission denied"}, // found in PATH, not executable
			{[]string{plain}, "/", 126, "", plain + ": Permission denied"},
			{[]string{dir + "/missing"}, "/", 127, "", dir + "/missing: "},
			{[]string{"script"}, dir + "/nonexist", 127, "", dir + "/nonexist"},
			{[]string{"script"}, plain, 127, "", plain},
			// exec took these for its options (busybox: 2 "illegal
			// option -l"; "--" ran echo).
			{[]string{"-l"}, "/", 127, "", "-l: not found"},
			{[]string{"--", "echo", "ran"}, "/", 127, "", "--: not found"},
		} {
			out, stderr, code := runScriptErr(t, sh, base, tc.argv, nil, tc.dir)
			if out != tc.stdout || code != tc.code || !strings.Contains(stderr, tc.stderr) || (tc.stderr == "") != (stderr == "") {
				t.Errorf("%s %q in %s: exit %d %q %q; want %d %q and %q in stderr", sh, tc.argv, tc.dir, code, out, stderr, tc.code, tc.stdout, tc.stderr)
			}
			line, err := shell.CommandLine(tc.argv, tc.dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			hout, herr, hcode := runLine(t, sh, base, line)
			if out != hout || stderr != herr || code != hcode {
				t.Errorf("%s %q in %s: exit %d %q %q; Host.Exec's command line: %d %q %q", sh, tc.argv, tc.dir, code, out, stderr, hcode, hout, herr)
			}
		}
	}
}

// runScriptErr is runScript with stderr apart.
func runScriptErr(t *testing.T, sh []string, base, argv []string, env map[string]string, dir string) (stdout, stderr string, code int) {
	t.Helper()
	line, err := commandScript(base, argv, env, dir)
	if err != nil {
		t.Fatal(err)
	}
	return runLine(t, sh, base, line)
}

// runLine runs line with `sh -c` in / with env as its environment.
func runLine(t *testing.T, sh []string, env []string, line string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, sh[0], append(sh[1:], "-c", line)...)
	cmd.Dir = "/"
	cmd.Env = env
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run %q: %v", line, err)
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

func TestCommandScriptRefusals(t *testing.T) {
	for _, tc := range []struct {
		base, argv []string
		env        map[string]string
		dir        string
	}{
		{nil, nil, nil, "/"},
		{nil, []string{""}, nil, "/"},
		{nil, []string{"true"}, nil, "relative"},
		{nil, []string{"true"}, map[string]string{"A-B": "1"}, "/"},
		{[]string{"A-B=1"}, []string{"true"}, nil, "/"},
	} {
		if line, err := commandScript(tc.base, tc.argv, tc.env, tc.dir); err == nil {
			t.Errorf("commandScript(%q, %q, %v, %q) = %q, want an error", tc.base, tc.argv, tc.env, tc.dir, line)
		}
	}
}
