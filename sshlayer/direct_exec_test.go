//go:build unix

package sshlayer

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/internal/shell"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

func TestParseCommandLineRoundTrip(t *testing.T) {
	cases := []struct {
		argv []string
		dir  string
		env  map[string]string
	}{
		{argv: []string{"true"}},
		{argv: []string{"printf", "%s|", "a b", "", "it's", `back\slash`, "$HOME", "semi;colon", "new\nline"}},
		{argv: []string{"env"}, dir: "/tmp/with space/it's", env: map[string]string{"B": "x y", "A": "", "C": "'"}},
		{argv: []string{"./x"}, dir: "./rel"}, // CommandLine writes a relative "rel" so
	}
	for _, c := range cases {
		line, err := shell.CommandLine(c.argv, c.dir, c.env)
		if err != nil {
			t.Fatal(err)
		}
		dir, exports, argv, ok := parseCommandLine(line)
		if !ok {
			t.Fatalf("parseCommandLine(%q) refused a line CommandLine wrote", line)
		}
		env := map[string]string{}
		for _, kv := range exports {
			env[kv[0]] = kv[1]
		}
		if c.env == nil {
			c.env = map[string]string{}
		}
		if dir != c.dir || !reflect.DeepEqual(argv, c.argv) || !reflect.DeepEqual(env, c.env) {
			t.Errorf("parseCommandLine(%q) = %q %q %q, want %q %q %q", line, dir, exports, argv, c.dir, c.env, c.argv)
		}
	}
	for _, line := range []string{
		"", "true", "exec", "exec ", "exec true; rm -rf /", "exec $HOME", "exec 'a", "exec a  b",
		"exec 'a''b'", "cd /tmp || exit 1; exec true", "cd /tmp; exec true", "export A=1; exec true; ",
		"export B=1; export A=1; exec true", "export A=1; export A=2; exec true", "export 1A=x; exec true",
		"exec a\\ b", "exec `id`", "exec a|b", "exec 'a'\\''b' c&",
	} {
		if _, _, _, ok := parseCommandLine(line); ok {
			t.Errorf("parseCommandLine(%q) accepted a line CommandLine does not write", line)
		}
	}
}

func FuzzParseCommandLine(f *testing.F) {
	for _, s := range []string{"exec true", "cd /tmp || exit 127; export A='x y'; exec env", "exec 'it'\\''s'", "exec a; b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		dir, exports, argv, ok := parseCommandLine(line)
		if !ok {
			return
		}
		env := map[string]string{}
		for _, kv := range exports {
			env[kv[0]] = kv[1]
		}
		again, err := shell.CommandLine(argv, dir, env)
		if err != nil || again != line {
			t.Fatalf("accepted %q, which CommandLine writes as %q (%v)", line, again, err)
		}
	})
}

// TestDirectExecMatchesDash runs the same command lines through dash and
// through the server's own exec, and compares what a user sees: output,
// errors, exit status, and the whole environment the program gets.
func TestDirectExecMatchesDash(t *testing.T) {
	real, err := filepath.EvalSymlinks("/bin/sh")
	testenv.RequirePeer(t, "dash as /bin/sh", err == nil && filepath.Base(real) == "dash")

	base := t.TempDir()
	work := filepath.Join(base, "work dir")
	link := filepath.Join(base, "link")
	bin1, bin2 := filepath.Join(base, "bin1"), filepath.Join(base, "bin2")
	for _, d := range []string{work, bin1, bin2} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(work, link); err != nil {
		t.Fatal(err)
	}
	write := func(path, body string, mode os.FileMode) {
		if err := os.WriteFile(path, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(work, "script"), "#!/bin/sh\necho script \"$0\" \"$@\"; pwd\n", 0o755)
	write(filepath.Join(bin2, "named"), "#!/bin/sh\necho named \"$0\"\n", 0o755)
	deep := filepath.Join(base, "deep")
	for _, d := range []string{filepath.Join(deep, "w"), filepath.Join(deep, "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(deep, "bin", "tool"), "#!/bin/sh\necho deep \"$0\"\n", 0o755)
	deepLink := filepath.Join(base, "deeplink")
	if err := os.Symlink(filepath.Join(deep, "w"), deepLink); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(work, "noshebang"), "echo no shebang \"$1\"\n", 0o755)
	write(filepath.Join(bin1, "tool"), "#!/bin/sh\necho bin1\n", 0o644) // not executable: skipped
	write(filepath.Join(bin2, "tool"), "#!/bin/sh\necho bin2\n", 0o755)
	if err := os.Mkdir(filepath.Join(bin1, "dirtool"), 0o755); err != nil {
		t.Fatal(err)
	}

	pathEnv := map[string]string{"PATH": bin1 + ":" + bin2 + ":/usr/bin:/bin"}
	cases := []struct {
		name   string
		argv   []string
		dir    string
		env    map[string]string
		direct bool // the server should run it itself
	}{
		{name: "env", argv: []string{"env"}, direct: true},
		{name: "env in a directory", argv: []string{"env"}, dir: work, env: map[string]string{"A": "x y", "B": "it's"}, direct: true},
		{name: "env through a symlink", argv: []string{"env"}, dir: link, direct: true},
		{name: "exported PWD and PATH", argv: []string{"env"}, dir: work, env: map[string]string{"PWD": "/elsewhere", "PATH": "/bin"}, direct: true},
		{name: "quoting", argv: []string{"printf", "%s|", "a b", "", "it's", "$HOME", "new\nline"}, direct: true},
		{name: "pwd", argv: []string{"sh", "-c", "pwd; pwd -P; echo $0 $#", "zero", "one"}, dir: link, direct: true},
		{name: "relative program", argv: []string{"./script", "arg"}, dir: work, direct: true},
		{name: "PATH search skips what cannot run", argv: []string{"tool"}, env: pathEnv, direct: true},
		{name: "exit status", argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, direct: true},
		{name: "script without #!", argv: []string{"./noshebang", "x"}, dir: work},
		{name: "not found", argv: []string{"no-such-program-here"}},
		{name: "a directory in PATH", argv: []string{"dirtool"}, env: pathEnv},
		{name: "missing directory", argv: []string{"true"}, dir: filepath.Join(base, "missing")},
		{name: "relative directory", argv: []string{"pwd"}, dir: "."},
		{name: "unclean directory", argv: []string{"pwd"}, dir: work + "/../link"},
		{name: "builtin name", argv: []string{"echo", "-n", "x"}, direct: true},
		{name: "empty PATH entry: $0 as dash passes it", argv: []string{"script"}, dir: work, env: map[string]string{"PATH": ":/usr/bin:/bin"}, direct: true},
		{name: "dot PATH entry", argv: []string{"script"}, dir: work, env: map[string]string{"PATH": ".:/usr/bin:/bin"}, direct: true},
		{name: "relative PATH entry through a symlinked directory", argv: []string{"tool"}, dir: deepLink, env: map[string]string{"PATH": "../bin:/usr/bin:/bin"}, direct: true},
		{name: "PATH search $0", argv: []string{"named"}, env: pathEnv, direct: true},
		{name: "exported OPTIND", argv: []string{"true"}, env: map[string]string{"OPTIND": "x"}},
		{name: "exported IFS", argv: []string{"env"}, env: map[string]string{"IFS": ":"}},
	}

	type result struct {
		out, errOut string
		status      int
	}
	run := func(ts *TestServer, c *ssh.Client, line string) result {
		t.Helper()
		out, errOut, err := srvRunCmd(t, c, line, nil)
		r := result{out: out, errOut: errOut}
		var ee *ssh.ExitError
		if errors.As(err, &ee) {
			r.status = ee.ExitStatus()
		} else if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return r
	}
	// env's lines, sorted, with the peer's port (each connection's own)
	// masked.
	sortedLines := func(s string) string {
		l := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
		for i, kv := range l {
			if k, _, _ := strings.Cut(kv, "="); k == "SSH_CLIENT" || k == "SSH_CONNECTION" {
				l[i] = k + "=…"
			}
		}
		sort.Strings(l)
		return strings.Join(l, "\n")
	}
	shellTS := srvStartServer(t, &ServerConfig{Shell: "/bin/sh", AlwaysShell: true, Dir: base})
	ownTS := srvStartServer(t, &ServerConfig{Shell: "/bin/sh", Dir: base})
	shellC, ownC := srvDialServer(t, shellTS), srvDialServer(t, ownTS)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			line, err := shell.CommandLine(c.argv, c.dir, c.env)
			if err != nil {
				t.Fatal(err)
			}
			before := ownTS.Server.directStarts.Load()
			want := run(shellTS, shellC, line)
			got := run(ownTS, ownC, line)
			if c.argv[0] == "env" {
				want.out, got.out = sortedLines(want.out), sortedLines(got.out)
			}
			if got != want {
				t.Errorf("%q:\n  own exec: %+v\n  dash:     %+v", line, got, want)
			}
			if direct := ownTS.Server.directStarts.Load() > before; direct != c.direct {
				t.Errorf("%q: ran without the shell = %v, want %v", line, direct, c.direct)
			}
			if shellTS.Server.directStarts.Load() != 0 {
				t.Errorf("AlwaysShell: a command ran without the shell")
			}
		})
	}
}

// A line too long to start dash with (Linux refuses one argument of 128
// KiB) is left to the shell, which then fails as dash would.
func TestDirectCommandLeavesLongLinesToTheShell(t *testing.T) {
	base := []string{"PATH=/usr/bin:/bin"}
	line, err := shell.CommandLine([]string{"true", strings.Repeat("x", 127<<10)}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := directCommand(line, "/", base); !ok {
		t.Fatalf("a %d-byte line was refused", len(line))
	}
	line, _ = shell.CommandLine([]string{"true", strings.Repeat("x", 128<<10)}, "", nil)
	if _, ok := directCommand(line, "/", base); ok {
		t.Fatalf("a %d-byte line was run without the shell", len(line))
	}
}
