package execapi

import (
	"context"
	"errors"
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
	const oci = "OCI runtime exec failed: exec failed: unable to start container process: "
	for _, sh := range shells(t) {
		for _, tc := range []struct {
			argv []string
			dir  string
			out  string
			code int
		}{
			{[]string{"script", "a b"}, dir, script + "|a b|" + dir + "\n", 7}, // found in PATH; a script's $0 is its path
			{[]string{script, "$x"}, "/", script + "|$x|/\n", 7},
			{[]string{"nonexist"}, "/", oci + "exec: \"nonexist\": executable file not found in $PATH: unknown\r\n", 126},
			{[]string{"plain"}, "/", oci + "exec: \"plain\": executable file not found in $PATH: unknown\r\n", 126},
			{[]string{plain}, "/", oci + "exec: \"" + plain + "\": permission denied: unknown\r\n", 126},
			{[]string{dir + "/missing"}, "/", oci + "exec: \"" + dir + "/missing\": stat " + dir + "/missing: no such file or directory: unknown\r\n", 126},
			{[]string{"script"}, dir + "/nonexist", oci + "chdir to cwd (\"" + dir + "/nonexist\") set in config.json failed: no such file or directory: unknown\r\n", 126},
			{[]string{"script"}, plain, oci + "chdir to cwd (\"" + plain + "\") set in config.json failed: not a directory: unknown\r\n", 126},
		} {
			out, code := runScript(t, sh, base, tc.argv, nil, tc.dir)
			if out != tc.out || code != tc.code {
				t.Errorf("%s %q in %s: exit %d %q; want %d %q", sh, tc.argv, tc.dir, code, out, tc.code, tc.out)
			}
		}
	}
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
