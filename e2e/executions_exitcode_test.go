package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
)

// TestExitCodeConventions: one convention on every path a command takes,
// POSIX shells': a program not found exits 127, one not executable 126, a
// missing cwd 127, each with the shell's message on stderr; the same
// words through the executions API's agent tunnel, its docker exec
// fallback and Host.Exec over SSH to the sandbox. A signal N is 128+N
// over the API (a shell's $?) and ExitCode -1 with Signal over Host.Exec
// (os/exec's), on the sandbox and on a machine. Over the API a missing
// program answered 126 with runc's message on stdout (audit31). A program
// named "-l" is looked up (127), not taken for exec's option.
func TestExitCodeConventions(t *testing.T) {
	g, c, image := execGateway(t)
	ctx := testCtx(t, 5*time.Minute)
	e := provision(t, ctx, c, execRequest(image))
	h, err := c.Dial(ctx, e.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	g.startAgent("exitcodes-machine", "")
	m, err := c.Dial(ctx, "exitcodes-machine")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	// Arguments too long for the tunnel's one-argument script send a
	// command to docker exec (the fallback), which passes them word by
	// word; "$0" and "$@" of sh -c take them.
	long := make([]string, 200)
	for i := range long {
		long[i] = strings.Repeat("x", 1000)
	}
	cases := []struct {
		name   string
		argv   []string
		cwd    string
		code   int
		stderr string
		// fallback is docker exec's stderr where it differs: busybox
		// names line 0 of a plain command not found when sh -c was
		// given $0, as docker exec's script is ("$@").
		fallback string
	}{
		{"not found", []string{"nonexist"}, "", 127, "sh: exec: line 0: nonexist: not found\n", ""},
		{"not executable", []string{"/etc/passwd"}, "", 126, "sh: exec: line 0: /etc/passwd: Permission denied\n", ""},
		{"missing cwd", []string{"true"}, "/nonexist", 127, "sh: cd: line 0: can't cd to /nonexist: No such file or directory\n", ""},
		// A program named "-l" or "--" is one to look up, not exec's
		// option: exec answered 2 "illegal option -l", and "--" ran echo.
		{"named -l", []string{"-l"}, "", 127, "sh: -l: not found\n", "sh: line 0: -l: not found\n"},
		{"named --", []string{"--", "echo", "ran"}, "", 127, "sh: --: not found\n", "sh: line 0: --: not found\n"},
	}
	_, _, fallback0 := execWays(t, g)
	for _, tc := range cases {
		for _, way := range []string{"tunnel", "fallback"} {
			argv, stderr := tc.argv, tc.stderr
			if way == "fallback" {
				argv = append(append([]string(nil), argv...), long...)
				if tc.fallback != "" {
					stderr = tc.fallback
				}
			}
			res, err := c.Exec(ctx, e.ExecutionID, client.ExecRequest{Command: argv[0], Args: argv[1:], Cwd: tc.cwd, TimeoutMs: 60000})
			if err != nil {
				t.Fatalf("%s (%s): %v", tc.name, way, err)
			}
			if res.ExitCode != tc.code || res.Stdout != "" || res.Stderr != stderr {
				t.Errorf("API %s (%s): exit %d stdout %q stderr %q; want %d, stderr %q", tc.name, way, res.ExitCode, res.Stdout, res.Stderr, tc.code, stderr)
			}
		}
		res, err := h.Exec(ctx, tc.argv, hostgate.ExecOptions{SpawnOptions: hostgate.SpawnOptions{Dir: tc.cwd}})
		if err != nil || res.ExitCode != tc.code || len(res.Stdout) != 0 || string(res.Stderr) != tc.stderr {
			t.Errorf("Host.Exec %s: %+v %q %v; want %d, stderr %q", tc.name, res, res.Stderr, err, tc.code, tc.stderr)
		}
	}
	for _, sig := range []struct {
		name string
		code int
	}{{"TERM", 143}, {"KILL", 137}} {
		for _, way := range []string{"tunnel", "fallback"} {
			args := []string{"-c", "kill -" + sig.name + " $$"}
			if way == "fallback" {
				args = append(args, long...)
			}
			res, err := c.Exec(ctx, e.ExecutionID, client.ExecRequest{Command: "/bin/sh", Args: args, TimeoutMs: 60000})
			if err != nil || res.ExitCode != sig.code {
				t.Errorf("API %s (%s): %+v %v; want exit %d", sig.name, way, res, err, sig.code)
			}
		}
		for name, host := range map[string]*hostgate.Host{"sandbox": h, "machine": m} {
			res, err := host.Exec(ctx, []string{"/bin/sh", "-c", "kill -" + sig.name + " $$"}, hostgate.ExecOptions{})
			if err != nil || res.ExitCode != -1 || res.Signal != hostgate.Signal(sig.name) {
				t.Errorf("Host.Exec %s on the %s: %+v %v; want ExitCode -1, Signal %s", sig.name, name, res, err, sig.name)
			}
		}
	}
	// Host.Exec on a machine: its own shell's words, the same codes.
	if res, err := m.Exec(ctx, []string{"nonexist-hostgate"}, hostgate.ExecOptions{}); err != nil || res.ExitCode != 127 || !strings.Contains(string(res.Stderr), "nonexist-hostgate: not found") {
		t.Errorf("Host.Exec not found on the machine: %+v %q %v", res, res.Stderr, err)
	}
	for _, argv := range [][]string{{"-l"}, {"--", "echo", "ran"}} {
		if res, err := m.Exec(ctx, argv, hostgate.ExecOptions{}); err != nil || res.ExitCode != 127 || !strings.Contains(string(res.Stderr), argv[0]+": not found") {
			t.Errorf("Host.Exec %q on the machine: %+v %q %v, want 127 not found", argv, res, res.Stderr, err)
		}
	}
	if res, err := m.Exec(ctx, []string{"/etc/passwd"}, hostgate.ExecOptions{}); err != nil || res.ExitCode != 126 {
		t.Errorf("Host.Exec not executable on the machine: %+v %q %v", res, res.Stderr, err)
	}
	if res, err := m.Exec(ctx, []string{"true"}, hostgate.ExecOptions{SpawnOptions: hostgate.SpawnOptions{Dir: "/nonexist"}}); err != nil || res.ExitCode != 127 {
		t.Errorf("Host.Exec missing cwd on the machine: %+v %q %v", res, res.Stderr, err)
	}
	if _, _, fallback1 := execWays(t, g); fallback1-fallback0 != len(cases)+2 {
		n := fallback1 - fallback0
		t.Errorf("%d commands went to docker exec, want %d", n, len(cases)+2)
	}
}

// TestSandboxExecArgSpace: over the API, a command whose words with the
// environment pass the 2 MiB one program may be given in the sandbox (a
// quarter of the 8 MiB stack limit set at create) is refused with 400
// naming args, and the execution lives on; a command just under runs. It
// answered 200, exit code 1, "exec /bin/sh: argument list too long".
func TestSandboxExecArgSpace(t *testing.T) {
	_, c, image := execGateway(t)
	ctx := testCtx(t, 5*time.Minute)
	e := provision(t, ctx, c, execRequest(image))
	words := func(n int) []string {
		a := []string{"-c", `n=0; for w; do n=$((n+${#w})); done; echo $n`, "sh"}
		for range n {
			a = append(a, strings.Repeat("a", 100_000))
		}
		return a
	}
	// 20 words: 2000000 bytes and the rest under 2097152.
	res, err := c.Exec(ctx, e.ExecutionID, client.ExecRequest{Command: "/bin/sh", Args: words(20), TimeoutMs: 60000})
	if err != nil || res.ExitCode != 0 || res.Stdout != "2000000\n" {
		t.Fatalf("20 words of 100000 bytes: %+v %v; want them run", res, err)
	}
	_, err = c.Exec(ctx, e.ExecutionID, client.ExecRequest{Command: "/bin/sh", Args: words(21), TimeoutMs: 60000})
	if ae := apiErr(err); ae == nil || ae.Status != http.StatusBadRequest || ae.Code != "invalid_request" || !strings.HasPrefix(ae.Message, "args: ") || !strings.Contains(ae.Message, "stdin") {
		t.Fatalf("21 words of 100000 bytes: %v; want 400 invalid_request naming args and stdin", err)
	}
	if res, err := c.Exec(ctx, e.ExecutionID, client.ExecRequest{Command: "true", TimeoutMs: 60000}); err != nil || res.ExitCode != 0 {
		t.Fatalf("a command after the refusal: %+v %v", res, err)
	}
}
