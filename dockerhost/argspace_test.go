package dockerhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// takesRE reads the bytes a refused command's words take from its error.
var takesRE = regexp.MustCompile(`take (\d+) bytes, over the (\d+) `)

// testExecArgSpace: a command whose arguments, with the environment, pass
// what one execve may hold in the sandbox (a quarter of the stack limit
// set at create) is refused with 400 naming args and the fix; it
// answered 200, exit code 1, "exec /bin/sh: argument list too long". The
// most bytes the gateway allows run, and are what the kernel allows: one
// byte more, passed to docker exec behind the gateway's back, is refused
// by the kernel. The container's environment (a provision variable of
// 30000 bytes) counts.
func testExecArgSpace(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	req := emptyReq(img, small())
	req.Env = map[string]string{"BIG": strings.Repeat("e", 30_000)}
	ex := provision(t, h, req)
	ctx := testCtx(t, 2*time.Minute)
	if res := sh(t, h, ex.ExecutionID, "ulimit -s; ulimit -Hs"); res.Stdout != fmt.Sprintf("%d\nunlimited\n", SandboxStack>>10) {
		t.Fatalf("the sandbox's stack limit: %q, want %d KiB, hard unlimited", res.Stdout, SandboxStack>>10)
	}
	// Words of 100000 bytes, under MAX_ARG_STRLEN, the last one sized.
	args := func(total int) []string {
		a := []string{"-c", `n=0; for w; do n=$((n+${#w})); done; echo $n`, "sh"}
		for total > 0 {
			w := min(total, 100_000)
			a = append(a, strings.Repeat("a", w))
			total -= w
		}
		return a
	}
	execReq := func(total int) ExecRequest {
		return ExecRequest{Command: "/bin/sh", Args: args(total), Env: map[string]string{"MINE": "1"}, TimeoutMs: 60_000}
	}
	// Over: the answer says by how much. 21 words, as at the boundary
	// (each word is a pointer and a NUL more).
	const far = 2_099_999
	_, err := h.Exec(ctx, ex.ExecutionID, execReq(far))
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidRequest || e.Field != "args" || !strings.Contains(e.Message, "stdin") {
		t.Fatalf("%d bytes of arguments: %v, want invalid_request on args naming stdin", far, err)
	}
	m := takesRE.FindStringSubmatch(e.Message)
	if m == nil {
		t.Fatalf("refusal without its numbers: %q", e.Message)
	}
	takes, _ := strconv.Atoi(m[1])
	space, _ := strconv.Atoi(m[2])
	if space != 2<<20 {
		t.Errorf("space %d, want 2 MiB, a quarter of the 8 MiB stack", space)
	}
	most := far - (takes - space)
	if (most-1)/100_000 != (far-1)/100_000 {
		t.Fatalf("the most bytes allowed, %d, are not in as many words as %d: pick another far", most, far)
	}
	t.Logf("%d bytes of arguments take %d of %d; the most allowed: %d", far, takes, space, most)
	res, err := h.Exec(ctx, ex.ExecutionID, execReq(most))
	if err != nil || res.ExitCode != 0 || res.Stdout != fmt.Sprintf("%d\n", most) {
		t.Fatalf("%d bytes of arguments, the most allowed: %+v %v; want them run", most, res, err)
	}
	_, err = h.Exec(ctx, ex.ExecutionID, execReq(most+1))
	if !errors.As(err, &e) || e.Code != CodeInvalidRequest || e.Field != "args" {
		t.Fatalf("%d bytes of arguments, one over: %v, want invalid_request on args", most+1, err)
	}
	if _, err := h.Get(ctx, ex.ExecutionID); err != nil {
		t.Fatalf("the execution after a refused exec: %v", err)
	}
	// The kernel draws the line where the gateway does: docker exec, the
	// gateway's check aside, runs the most allowed and refuses one more.
	live, err := h.live(ctx, ex.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		total  int
		code   int
		stdout string
	}{{most, 0, fmt.Sprintf("%d\n", most)}, {most + 1, 1, ""}} {
		r := execReq(tc.total)
		code, out, stderr := rawExec(t, cli, live.ContainerID, userOf(live.uid), shellArgv(append([]string{r.Command}, r.Args...), WorkspaceDir, r.Env), envList(r.Env))
		if code != tc.code || out != tc.stdout || (tc.code == 1) != strings.Contains(stderr, "argument list too long") {
			t.Errorf("docker exec of %d bytes of arguments: exit %d %q %q; want %d %q", tc.total, code, out, stderr, tc.code, tc.stdout)
		}
	}
}

// rawExec runs argv in a container by docker exec and returns its exit
// code, stdout and stderr.
func rawExec(t *testing.T, cli *client.Client, cid, user string, argv, env []string) (int, string, string) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	created, err := cli.ContainerExecCreate(ctx, cid, container.ExecOptions{User: user, Cmd: argv, Env: env, WorkingDir: "/", AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	hj, err := cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer hj.Close()
	var o, e bytes.Buffer
	if _, err := stdcopy.StdCopy(&o, &e, hj.Reader); err != nil {
		t.Fatal(err)
	}
	insp, err := cli.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	return insp.ExitCode, o.String(), e.String()
}

// TestProvisionEnvSpace: a provision env over half of what a program's
// arguments and environment may hold in the sandbox is refused naming
// env and the fix; its container's main process could not start (E2BIG),
// and the caller read "the container ended during provisioning (status
// 1; runtimeMs or memoryBytes too small?)". One just under runs through
// validation.
func TestProvisionEnvSpace(t *testing.T) {
	p := &Policy{Max: DefaultMaxResources()}
	env := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("V%02d", i)] = strings.Repeat("v", 30_000)
		}
		return m
	}
	req := validReq()
	req.Env = env(34) // 34 × 30013 bytes and what provisionEnv adds: under 1 MiB
	if err := p.ValidateProvision(&req); err != nil {
		t.Fatalf("an env of 34 × 30000 bytes: %v, want it allowed", err)
	}
	req.Env = env(35)
	var e *Error
	if err := p.ValidateProvision(&req); !errors.As(err, &e) || e.Field != "env" || !strings.Contains(e.Message, "in a file") {
		t.Fatalf("an env of 35 × 30000 bytes: %v, want invalid_request on env", err)
	}
	if got := argSpace(); got != 2<<20 {
		t.Errorf("argSpace = %d, want 2 MiB, a quarter of the 8 MiB stack", got)
	}
	// execve's count: the path, each string with its NUL, a pointer each.
	if got := execveBytes("/bin/sh", []string{"sh", "-c", "x"}, []string{"A=1"}); got != 8+3+3+2+4+8*4 {
		t.Errorf("execveBytes = %d", got)
	}
	if got := execEnv([]string{"PATH=/p", "A=1"}, "box", map[string]string{"A": "2", "HOME": "/w"}); !slices.Equal(got, []string{"PATH=/p", "HOSTNAME=box", "A=2", "HOME=/w"}) {
		t.Errorf("execEnv = %q", got)
	}
}

// stackDocker answers ContainerInspect with hc.
type stackDocker struct {
	fakeDocker
	hc *container.HostConfig
}

func (f *stackDocker) ContainerInspect(context.Context, string) (container.InspectResponse, error) {
	return container.InspectResponse{ContainerJSONBase: &container.ContainerJSONBase{HostConfig: f.hc}, Config: &container.Config{}}, nil
}

// TestArgSpaceOfAnOlderContainer: the words' total is refused only in a
// container made with SandboxStack; one made before sandboxes got their
// stack limit (adopted after an upgrade) has the engine's, which the
// gateway does not know, and the kernel answers for it.
func TestArgSpaceOfAnOlderContainer(t *testing.T) {
	req := &ExecRequest{Command: "true", Args: slices.Repeat([]string{strings.Repeat("a", 100_000)}, 22)}
	for _, tc := range []struct {
		name    string
		hc      *container.HostConfig
		refused bool
	}{
		{"made with the stack limit", &container.HostConfig{Resources: container.Resources{Ulimits: []*container.Ulimit{{Name: "nofile", Soft: 1024, Hard: 1024}, {Name: "stack", Soft: SandboxStack, Hard: -1}}}}, true},
		{"made before it", &container.HostConfig{Resources: container.Resources{Ulimits: []*container.Ulimit{{Name: "nofile", Soft: 1024, Hard: 1024}}}}, false},
		{"another stack limit", &container.HostConfig{Resources: container.Resources{Ulimits: []*container.Ulimit{{Name: "stack", Soft: 16 << 20, Hard: -1}}}}, false},
		{"no host config", nil, false},
	} {
		h := &Docker{api: &stackDocker{hc: tc.hc}}
		err := h.checkArgSpace(testCtx(t, time.Minute), &execution{Execution: Execution{ContainerID: "c"}}, req)
		var e *Error
		if refused := errors.As(err, &e) && e.Field == "args"; refused != tc.refused || (!tc.refused && err != nil) {
			t.Errorf("%s: %v, want refused %v", tc.name, err, tc.refused)
		}
	}
}

// sumArgs is the argv of a shell that prints how many bytes its words
// after $0 take, with words of 100000 bytes (under MAX_ARG_STRLEN), the
// last one sized, total in all.
func sumArgs(total int) []string {
	a := []string{"-c", `n=0; for w; do n=$((n+${#w})); done; echo $n`, "sh"}
	for total > 0 {
		w := min(total, 100_000)
		a = append(a, strings.Repeat("a", w))
		total -= w
	}
	return a
}

// bigEnvImage commits the test image with an environment of n variables
// of 30000 bytes, as an image may carry, and returns its reference.
func bigEnvImage(t *testing.T, cli *client.Client, img string, n int) string {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	var env []string
	for i := range n {
		env = append(env, fmt.Sprintf("IMG%02d=%s", i, strings.Repeat("i", 30_000)))
	}
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: img, Cmd: []string{"true"}, Env: env}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) }()
	ref := "hostgate-test/bigenv:" + uniqueOwner()
	if _, err := cli.ContainerCommit(ctx, c.ID, container.CommitOptions{Reference: ref}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true})
	})
	return ref
}

// testExecArgSpaceImageEnv: in a sandbox whose image's own environment is
// huge (55 variables, 1.65 MB), a command of under 512 KiB of words
// that, with it, passes what one execve may hold is refused naming args,
// and the most bytes allowed run: the container's environment was read
// only for commands over 512 KiB, so such a command answered 200, exit
// code 1, "argument list too long". The count is kept from provision (and
// adoption: a restarted host draws the same line) and exact, docker exec
// behind the gateway's back drawing it at the same byte.
func testExecArgSpaceImageEnv(t *testing.T) {
	cli, img := engine(t)
	owner := uniqueOwner()
	h := newTestHost(t, cli, &Config{Owner: owner, AllowUnpinnedImages: true})
	ex := provision(t, h, emptyReq(bigEnvImage(t, cli, img, 55), small()))
	argSpaceEdge(t, cli, h, ex.ExecutionID, 500_000, func() *Docker {
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		h = newTestHost(t, cli, &Config{Owner: owner, AllowUnpinnedImages: true})
		return h
	})
}

// testExecArgSpacePooled: the same edge in a container of the warm pool,
// whose environment is read from the claim's inspection and whose
// provision env (30 variables of 30000 bytes) travels with each command.
func testExecArgSpacePooled(t *testing.T) {
	cli, img := engine(t)
	req := emptyReq(img, small())
	h := newPoolHost(t, cli, PoolConfig{Size: 1, Keys: []ProvisionRequest{req}})
	waitPool(t, h, "a warm container", func(s PoolStats) bool { return s.Ready == 1 })
	req.Env = map[string]string{}
	for i := range 30 {
		req.Env[fmt.Sprintf("POOLED%02d", i)] = strings.Repeat("p", 30_000)
	}
	ex := provision(t, h, req)
	if s := h.PoolStats(); s.Hits != 1 {
		t.Fatalf("want a pool hit, stats %+v", s)
	}
	argSpaceEdge(t, cli, h, ex.ExecutionID, 1_200_000, nil)
}

// argSpaceEdge finds, from the refusal of far bytes of arguments (in
// 100000-byte words, with a variable IMG00 of the command's own), the
// most bytes execution id allows, and checks they run, that one more is
// refused, and that docker exec behind the gateway's back, given the same
// argv and env, runs the first and gets E2BIG for the second. restart,
// when set, returns a host that adopted the execution, where the same
// line is drawn.
func argSpaceEdge(t *testing.T, cli *client.Client, h *Docker, id string, far int, restart func() *Docker) {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	execReq := func(total int) ExecRequest {
		return ExecRequest{Command: "/bin/sh", Args: sumArgs(total), Env: map[string]string{"IMG00": "replaced"}, TimeoutMs: 60_000}
	}
	res, err := h.Exec(ctx, id, execReq(far))
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidRequest || e.Field != "args" {
		t.Fatalf("%d bytes of arguments: %+v %v, want invalid_request on args", far, res, err)
	}
	m := takesRE.FindStringSubmatch(e.Message)
	if m == nil {
		t.Fatalf("refusal without its numbers: %q", e.Message)
	}
	takes, _ := strconv.Atoi(m[1])
	space, _ := strconv.Atoi(m[2])
	most := far - (takes - space)
	if (most-1)/100_000 != (far-1)/100_000 {
		t.Fatalf("the most bytes allowed, %d, are not in as many words as %d: pick another far", most, far)
	}
	t.Logf("%d bytes of arguments take %d of %d; the most allowed: %d", far, takes, space, most)
	live, err := h.live(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; ; round++ {
		res, err = h.Exec(ctx, id, execReq(most))
		if err != nil || res.ExitCode != 0 || res.Stdout != fmt.Sprintf("%d\n", most) {
			t.Fatalf("round %d: %d bytes of arguments, the most allowed: %+v %v; want them run", round, most, res, err)
		}
		if _, err := h.Exec(ctx, id, execReq(most+1)); !errors.As(err, &e) || e.Code != CodeInvalidRequest || e.Field != "args" {
			t.Fatalf("round %d: %d bytes of arguments, one over: %v, want invalid_request on args", round, most+1, err)
		}
		if restart == nil || round == 1 {
			break
		}
		h = restart()
	}
	for _, tc := range []struct {
		total int
		code  int
	}{{most, 0}, {most + 1, 1}} {
		r := execReq(tc.total)
		env := maps.Clone(live.env) // a pooled container's provision env, which travels with each command
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, r.Env)
		code, _, stderr := rawExec(t, cli, live.ContainerID, userOf(live.uid), shellArgv(append([]string{r.Command}, r.Args...), WorkspaceDir, env), envList(env))
		if code != tc.code || (tc.code == 1) != strings.Contains(stderr, "argument list too long") {
			t.Errorf("docker exec of %d bytes of arguments: exit %d %q; want %d", tc.total, code, stderr, tc.code)
		}
	}
}

// inspectCount answers ContainerInspect with info (or err), counting.
type inspectCount struct {
	fakeDocker
	info  container.InspectResponse
	err   error
	calls atomic.Int32
}

func (f *inspectCount) ContainerInspect(context.Context, string) (container.InspectResponse, error) {
	f.calls.Add(1)
	return f.info, f.err
}

// TestContainerEnvReadOnce: an adopted container's environment is read
// at adoption and counted for every command, small or not, with no
// engine call after; when that read failed, the first command reads it.
// What is kept counts as execEnv does: a command's variable replaces the
// container's of the same name, HOME the one runc would set.
func TestContainerEnvReadOnce(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	spec, _ := json.Marshal(redact(validReq()))
	info := container.InspectResponse{
		ContainerJSONBase: &container.ContainerJSONBase{HostConfig: &container.HostConfig{Resources: container.Resources{Ulimits: []*container.Ulimit{{Name: "stack", Soft: SandboxStack, Hard: -1}}}}},
		Config:            &container.Config{Hostname: "box", Env: []string{"PATH=/p", "BIG=" + strings.Repeat("b", 2_000_000)}},
	}
	for _, failFirst := range []bool{false, true} {
		f := &inspectCount{fakeDocker: fakeDocker{list: []container.Summary{{ID: "c-live", State: "running", Labels: map[string]string{
			LabelExecution: "live", LabelExpires: fmtUnix(now.Add(time.Hour)), LabelSpec: string(spec), LabelOwner: "gw", LabelUID: strconv.Itoa(sandboxUIDBase)}}}}, info: info}
		if failFirst {
			f.err = errors.New("engine busy")
		}
		h, err := NewDocker(testCtx(t, time.Minute), nil, f, &Config{Owner: "gw", CheckpointDir: t.TempDir(), Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		e, err := h.live(testCtx(t, time.Minute), "live")
		if err != nil {
			t.Fatal(err)
		}
		f.err = nil
		at := f.calls.Load()
		small := &ExecRequest{Command: "true", Args: []string{strings.Repeat("a", 100_000)}}
		for range 3 {
			err := h.checkArgSpace(testCtx(t, time.Minute), e, small)
			var ae *Error
			if !errors.As(err, &ae) || ae.Field != "args" {
				t.Fatalf("failFirst %v: 100000 bytes with a 2 MB environment: %v, want refused on args", failFirst, err)
			}
		}
		// The command's BIG replaces the container's: room again.
		small.Env = map[string]string{"BIG": "1"}
		if err := h.checkArgSpace(testCtx(t, time.Minute), e, small); err != nil {
			t.Fatalf("failFirst %v: with BIG replaced: %v, want allowed", failFirst, err)
		}
		if want := map[bool]int32{false: 1, true: 2}[failFirst]; f.calls.Load() != want || (failFirst && at != 1) {
			t.Errorf("failFirst %v: the engine was asked %d times (%d at adoption), want %d", failFirst, f.calls.Load(), at, want)
		}
	}
	// An engine that answers neither at adoption nor at the command: a
	// command of a quarter of the space or less runs as it did before
	// anything was read; a larger one is answered with the engine's error.
	h := &Docker{api: &inspectCount{err: errors.New("engine busy")}}
	e := &execution{Execution: Execution{ContainerID: "c"}}
	if err := h.checkArgSpace(testCtx(t, time.Minute), e, &ExecRequest{Command: "true", Args: []string{strings.Repeat("a", 100_000)}}); err != nil {
		t.Errorf("a 100000-byte command, the engine silent: %v, want it let through", err)
	}
	if err := h.checkArgSpace(testCtx(t, time.Minute), e, &ExecRequest{Command: "true", Args: slices.Repeat([]string{strings.Repeat("a", 100_000)}, 6)}); err == nil || !strings.Contains(err.Error(), "engine busy") {
		t.Errorf("a 600000-byte command, the engine silent: %v, want the engine's error", err)
	}
	// bytesWith counts as execveBytes over execEnv would.
	ce := readContainerEnv(info)
	for _, env := range []map[string]string{nil, {"BIG": "1"}, {"HOME": "/h", "NEW": "v"}, {"PATH": "/q", "HOSTNAME": "x"}} {
		if got, want := ce.bytesWith(env), execveBytes("", nil, execEnv(info.Config.Env, "box", env))-execveBytes("", nil, nil); got != want {
			t.Errorf("bytesWith(%v) = %d, want %d", env, got, want)
		}
	}
}

// testProvisionImageEnvTooLarge: an image whose environment alone (72
// variables, 2.16 MB) takes more than a program's arguments and
// environment may hold in a sandbox is refused naming image and what to
// change, nothing left: its container ended at start, answered "the
// container ended during provisioning (status 1; runtimeMs or memoryBytes
// too small?)", an engine failure (502) with a wrong hint.
func testProvisionImageEnvTooLarge(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, &Config{AllowUnpinnedImages: true})
	ex, err := h.Provision(testCtx(t, 2*time.Minute), emptyReq(bigEnvImage(t, cli, img, 72), small()))
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidRequest || e.Field != "image" || !strings.Contains(e.Message, "no program can start in it") || !strings.Contains(e.Message, "smaller environment") {
		t.Fatalf("an image of 2.16 MB of environment: %+v %v, want invalid_request on image", ex, err)
	}
	t.Logf("%v", err)
	for _, c := range ownerContainers(t, cli, h) {
		waitRemoved(t, cli, c.ID, time.Minute)
	}
	if n := len(h.List()); n != 0 {
		t.Errorf("%d executions after the refusal", n)
	}
}
