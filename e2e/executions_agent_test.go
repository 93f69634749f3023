package e2e

import (
	"bufio"
	"context"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/client"
)

// sandboxShell runs script in the execution's container as its user
// through docker exec, as sandbox code would run it, apart from the
// gateway's agent (a command of the agent's that stops or kills it loses
// its own channel).
func sandboxShell(t testing.TB, ctx context.Context, id, script string) string {
	t.Helper()
	cid := containerOf(t, id)
	out, err := exec.CommandContext(ctx, "docker", "exec", "-u", userOf(t, cid), cid, "/bin/sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("docker exec %q: %v %s", script, err, out)
	}
	return string(out)
}

// sandboxDecoyAgent starts a process named like the agent in the
// execution's container through docker exec, as sandbox code may, its
// stdin held open until the test ends, and returns its pid there.
func sandboxDecoyAgent(t testing.TB, ctx context.Context, id string) string {
	t.Helper()
	cid := containerOf(t, id)
	cmd := exec.CommandContext(ctx, "docker", "exec", "-i", "-u", userOf(t, cid), cid, "/bin/sh", "-c", `echo $$; exec /opt/hostgate/agent serve --stdio --mux --keys-stdin`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("decoy agent's pid: %q %v", line, err)
	}
	return strings.TrimSpace(line)
}

// waitAgentConnected waits until the gateway has connected to the
// execution's agent more than before times (the log line's count), and
// returns the count.
func waitAgentConnected(t testing.TB, g *gw, id string, before int) int {
	t.Helper()
	connected := regexp.MustCompile(`gateway connected to the execution agent[^\n]*execution=` + id)
	for deadline := time.Now().Add(time.Minute); ; {
		if n := len(connected.FindAllString(g.output(), -1)); n > before {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not connect to the agent of %s within a minute:\n%s", id, g.output())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSandboxFrozenAgent: sandbox code may stop its agent (kill -STOP, as
// its uid). The gateway routed the API's commands to the stopped agent's
// tunnel on: each waited its whole timeoutMs and answered timeout, which
// destroyed the execution. Now a command the agent does not open a channel
// for within the gateway's bound runs through docker exec, and the gateway,
// its ping unanswered too, kills the stopped agent and attaches a new one,
// which later commands run through.
func TestSandboxFrozenAgent(t *testing.T) {
	g, c, image := execGateway(t)
	ctx := testCtx(t, 4*time.Minute)
	e := provision(t, ctx, c, execRequest(image))
	conns := waitAgentConnected(t, g, e.ExecutionID, 0)
	if out := sh(t, ctx, c, e.ExecutionID, "echo up"); out != "up\n" {
		t.Fatalf("first command: %q", out)
	}
	agentWays, _, _ := execWays(t, g)
	if agentWays == 0 {
		t.Fatal("the first command did not run through the agent")
	}
	// A decoy: a process of the agent's name that docker exec started
	// too, waiting for keys, stopped with the agent. KillStopped killed
	// it as well: it took every such process for the agent.
	decoy := sandboxDecoyAgent(t, ctx, e.ExecutionID)
	sandboxShell(t, ctx, e.ExecutionID, `for p in $(pidof agent); do [ $p = 1 ] || kill -STOP $p || exit; done`)

	t0 := time.Now()
	res, err := c.Exec(ctx, e.ExecutionID, client.ExecRequest{Command: "/bin/sh", Args: []string{"-c", "echo after the freeze"}, TimeoutMs: 60000})
	took := time.Since(t0)
	t.Logf("a command with the agent stopped took %v", took.Round(time.Millisecond))
	if err != nil || res.ExitCode != 0 || res.Stdout != "after the freeze\n" {
		t.Fatalf("a command with the agent stopped: %v %+v (after %v)", err, res, took)
	}
	// A new agent comes, the stopped one is gone (killed: it held its
	// threads of the pids limit), and commands run through the new one.
	g.waitFor(regexp.MustCompile(`agent unresponsive[^\n]*execution=`+e.ExecutionID), time.Minute)
	waitAgentConnected(t, g, e.ExecutionID, conns)
	if out := sandboxShell(t, ctx, e.ExecutionID, `for d in /proc/[0-9]*; do read -r s < $d/stat; case "$s" in *"(agent) T "*) echo "stopped: ${d#/proc/}";; esac; done; echo checked`); out != "stopped: "+decoy+"\nchecked\n" {
		t.Fatalf("after the new agent came: %q, want no stopped agent but the decoy, %s", out, decoy)
	}
	before, _, _ := execWays(t, g)
	t0 = time.Now()
	if out := sh(t, ctx, c, e.ExecutionID, "echo through the new agent"); out != "through the new agent\n" {
		t.Fatalf("after the new agent came: %q", out)
	}
	t.Logf("a command through the new agent took %v", time.Since(t0).Round(time.Millisecond))
	if after, _, _ := execWays(t, g); after != before+1 {
		t.Fatalf("commands through the agent: %d then %d, want one more", before, after)
	}
	status, body := g.api("GET", "/metrics", g.admin, nil)
	if status != 200 || !strings.Contains(string(body), `hostgate_sandbox_agent_restarts_total{reason="unresponsive"} 1`) {
		t.Fatalf("/metrics: %d, want one restart of an unresponsive agent:\n%s", status, grepLines(string(body), "agent_"))
	}
}

// TestSandboxAgentStoppedRepeatedly: a loop in the sandbox that stops
// every agent as it comes costs the gateway a bounded number of new
// agents, with backoff, then it gives up on the agent (counted), and every
// command meanwhile answers within seconds, through docker exec, or, when
// it went to a new agent that the loop stopped while it ran, agent_lost
// saying so (in .ci/run once: its result is unknown).
func TestSandboxAgentStoppedRepeatedly(t *testing.T) {
	g, c, image := execGateway(t)
	ctx := testCtx(t, 5*time.Minute)
	e := provision(t, ctx, c, execRequest(image))
	id := e.ExecutionID
	waitAgentConnected(t, g, id, 0)
	sandboxShell(t, ctx, id, `sh -c 'while :; do for p in $(pidof agent); do [ $p = 1 ] || kill -STOP $p; done; sleep 0.05; done' </dev/null >/dev/null 2>&1 &`)
	gaveUp := regexp.MustCompile(`agent keeps failing; giving up[^\n]*execution=` + id)
	var (
		slowest time.Duration
		lost    int
	)
	// Each agent is found stopped within two PingTimeouts (5 s), then
	// the backoff: 400 ms doubling.
	for until := time.Now().Add(3 * time.Minute); !gaveUp.MatchString(g.output()); {
		if time.Now().After(until) {
			t.Fatalf("the gateway did not give up on the agent within 3 minutes:\n%s", g.output())
		}
		t0 := time.Now()
		res, err := c.Exec(ctx, id, client.ExecRequest{Command: "/bin/sh", Args: []string{"-c", "echo alive"}, TimeoutMs: 60000})
		switch ae := apiErr(err); {
		case err == nil && res.ExitCode == 0 && res.Stdout == "alive\n":
		case ae != nil && ae.Code == "agent_lost" && strings.Contains(ae.Message, "stopped answering"):
			// Sent to an agent that the loop stopped while it ran the
			// command: its result is unknown, which agent_lost says.
			lost++
		default:
			t.Fatalf("a command while every agent is stopped: %v %+v", err, res)
		}
		slowest = max(slowest, time.Since(t0))
		time.Sleep(time.Second)
	}
	t.Logf("commands lost with an agent stopped under them: %d", lost)
	t.Logf("the slowest command while every agent was stopped took %v", slowest.Round(time.Millisecond))
	// What this guards is a command that waits out its own timeout
	// (60 s) on a stopped agent, not a number of seconds: a loaded -race
	// machine can take well past 15 s for an answer that came at once.
	if slowest > 40*time.Second {
		t.Errorf("a command took %v while every agent was stopped: it waited for a stopped agent, toward its own 60 s timeout", slowest)
	}
	_, body := g.api("GET", "/metrics", g.admin, nil)
	m := regexp.MustCompile(`hostgate_sandbox_agent_restarts_total\{reason="unresponsive"\} (\d+)`).FindStringSubmatch(string(body))
	t.Logf("agents replaced as unresponsive: %v", m)
	if m == nil || m[1] == "0" || len(m[1]) > 1 || m[1] > "5" || !strings.Contains(string(body), "hostgate_sandbox_agent_giveups_total 1") {
		t.Fatalf("/metrics, want 1 to 5 agents replaced as unresponsive, then one give-up:\n%s", grepLines(string(body), "agent_"))
	}
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestSandboxAgentKilled: sandbox code may kill its agent (kill -9, as its
// uid). A command the agent was running answers at once that the agent
// was killed (agent_lost; it guessed the command had killed it), not
// after the command's own time and not as an engine error; a command
// right after runs; the restart is counted and logged. Then a loop that kills every agent as it comes: the gateway
// re-attaches a bounded number of times with backoff, gives up (counted)
// and runs the sandbox's commands through docker exec, and the sandbox
// still ends at its deadline.
func TestSandboxAgentKilled(t *testing.T) {
	g, c, image := execGateway(t)
	ctx := testCtx(t, 4*time.Minute)
	req := execRequest(image)
	req.Resources.RuntimeMs = 70_000
	e := provisionShort(t, ctx, c, req, 55*time.Second)
	id := e.ExecutionID
	conns := waitAgentConnected(t, g, id, 0)

	// A command in flight as sandbox code kills the agent running it.
	type answer struct {
		err  error
		took time.Duration
	}
	inFlight := make(chan answer, 1)
	go func() {
		t0 := time.Now()
		// It would run past its own timeout: a gateway that waited
		// for it would answer 504 timeout, not agent_lost.
		_, err := c.Exec(ctx, id, client.ExecRequest{Command: "/bin/sh", Args: []string{"-c", "touch started; sleep 120; echo late"}, TimeoutMs: 60000})
		inFlight <- answer{err, time.Since(t0)}
	}()
	sandboxShell(t, ctx, id, `until [ -e /workspace/started ]; do sleep 0.05; done; for p in $(pidof agent); do [ $p = 1 ] || kill -9 $p; done`)
	a := <-inFlight
	t.Logf("the command in flight answered %v after it started", a.took.Round(time.Millisecond))
	ae := apiErr(a.err)
	// Told by the answer, and by its coming before the command's own
	// 60 s timeout, not by a number of seconds: 25 s (against a sleep of
	// 30) could pass on a loaded machine for an answer that came at once.
	if ae == nil || ae.Status != 502 || ae.Code != "agent_lost" || !strings.Contains(ae.Message, "the execution's agent was killed (SIGKILL") || a.took >= 60*time.Second {
		t.Fatalf("the command whose agent was killed: %v after %v, want 502 agent_lost at once, not at its own timeout", a.err, a.took)
	}
	if out := sh(t, ctx, c, id, "echo right after"); out != "right after\n" {
		t.Fatalf("a command right after the kill: %q", out)
	}
	g.waitFor(regexp.MustCompile(`agent ended while its execution lives; re-attaching[^\n]*execution=`+id), time.Minute)
	waitAgentConnected(t, g, id, conns)
	if out := sh(t, ctx, c, id, "echo through the new agent"); out != "through the new agent\n" {
		t.Fatalf("through the new agent: %q", out)
	}
	if _, body := g.api("GET", "/metrics", g.admin, nil); !strings.Contains(string(body), `hostgate_sandbox_agent_restarts_total{reason="ended"} 1`) {
		t.Fatalf("/metrics, want one agent restarted:\n%s", grepLines(string(body), "agent_"))
	}

	// Every agent killed as it comes.
	sandboxShell(t, ctx, id, `sh -c 'while :; do for p in $(pidof agent); do [ $p = 1 ] || kill -9 $p; done; sleep 0.05; done' </dev/null >/dev/null 2>&1 &`)
	g.waitFor(regexp.MustCompile(`agent keeps failing; giving up[^\n]*execution=`+id), 2*time.Minute)
	reattached := regexp.MustCompile(`agent ended while its execution lives; re-attaching[^\n]*execution=` + id)
	n := len(reattached.FindAllString(g.output(), -1))
	t.Logf("re-attached %d times before giving up", n)
	if n > 6 {
		t.Fatalf("re-attached %d times, want at most 1 + MaxRestarts (5)", n)
	}
	if _, body := g.api("GET", "/metrics", g.admin, nil); !strings.Contains(string(body), "hostgate_sandbox_agent_giveups_total 1") {
		t.Fatalf("/metrics, want one sandbox given up on:\n%s", grepLines(string(body), "agent_"))
	}
	if out := sh(t, ctx, c, id, "echo by docker exec"); out != "by docker exec\n" {
		t.Fatalf("a command once the gateway gave up on the agent: %q", out)
	}
	time.Sleep(2 * time.Second)
	if m := len(reattached.FindAllString(g.output(), -1)); m != n {
		t.Fatalf("re-attached again after giving up: %d, then %d", n, m)
	}

	// The deadline still ends it.
	cid := containerOf(t, id)
	for {
		if err := exec.Command("docker", "inspect", cid).Run(); err != nil {
			break
		}
		if time.Now().After(e.ExpiresAt.Add(30 * time.Second)) {
			t.Fatalf("container %s still there 30 s after its deadline %v", cid, e.ExpiresAt)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := c.Execution(ctx, id); apiErr(err) == nil || apiErr(err).Status != 410 || apiErr(err).Reason != "runtime" {
		t.Fatalf("the execution after its deadline: %v, want 410 for its runtime", err)
	}
}

// TestSandboxAgentBackAfterGivingUp: once the gateway gave up on a
// sandbox's agent (a loop killed every one as it came), it ran the
// sandbox's commands through docker exec, and the sandbox was no host,
// until the gateway restarted. Now, the loop gone, an agent the gateway
// tries a minute later comes up and runs commands again.
func TestSandboxAgentBackAfterGivingUp(t *testing.T) {
	g, c, image := execGateway(t)
	ctx := testCtx(t, 5*time.Minute)
	e := provision(t, ctx, c, execRequest(image))
	id := e.ExecutionID
	waitAgentConnected(t, g, id, 0)
	sandboxShell(t, ctx, id, `sh -c 'echo $$ >/workspace/killer; while :; do for p in $(pidof agent); do [ $p = 1 ] || kill -9 $p; done; sleep 0.05; done' </dev/null >/dev/null 2>&1 &`)
	g.waitFor(regexp.MustCompile(`agent keeps failing; giving up[^\n]*execution=`+id), 2*time.Minute)
	gaveUp := time.Now()
	conns := len(regexp.MustCompile(`gateway connected to the execution agent[^\n]*execution=`+id).FindAllString(g.output(), -1))
	sandboxShell(t, ctx, id, `kill $(cat /workspace/killer)`)
	g.waitFor(regexp.MustCompile(`agent back after the gateway gave up on it[^\n]*execution=`+id), 2*time.Minute)
	t.Logf("the agent was back %v after the give-up", time.Since(gaveUp).Round(time.Second))
	waitAgentConnected(t, g, id, conns)
	before, _, _ := execWays(t, g)
	if out := sh(t, ctx, c, id, "echo through the agent again"); out != "through the agent again\n" {
		t.Fatalf("once the agent is back: %q", out)
	}
	if after, _, _ := execWays(t, g); after != before+1 {
		t.Fatalf("commands through the agent: %d then %d, want one more", before, after)
	}
	_, body := g.api("GET", "/metrics", g.admin, nil)
	if !strings.Contains(string(body), "hostgate_sandbox_agent_giveups_total 1") || strings.Contains(string(body), `hostgate_sandbox_agent_restarts_total{reason="retry"} 0`) {
		t.Fatalf("/metrics, want one give-up and a retry:\n%s", grepLines(string(body), "agent_"))
	}
}

// TestSandboxAgentOneP: the agent in a sandbox its cgroup holds to one
// CPU runs the Go runtime on one P, read from the container's own cgroup
// as the engine set it; a larger limit, or GOMAXPROCS in its environment,
// leaves the runtime's default. The agent's line saying so is at Info,
// under the gateway's --log-level warn, so a second agent in the sandbox,
// at Info and without keys, says it and exits.
func TestSandboxAgentOneP(t *testing.T) {
	_, c, image := execGateway(t)
	ctx := testCtx(t, 3*time.Minute)
	const agentAtInfo = `/opt/hostgate/agent serve --stdio --mux --keys-stdin --log-level info </dev/null 2>&1; echo "exit $?"`
	const oneP = "one P: the cgroup holds this agent to one CPU or less"

	one := provision(t, ctx, c, execRequest(image))
	if out := sandboxShell(t, ctx, one.ExecutionID, agentAtInfo); !strings.Contains(out, oneP) || !strings.Contains(out, "cpus=1") {
		t.Errorf("agent at cpus 1: %q, want its one-P line at cpus=1", out)
	}
	if out := sandboxShell(t, ctx, one.ExecutionID, "GOMAXPROCS=2 "+agentAtInfo); strings.Contains(out, oneP) || !strings.Contains(out, "exit 1") {
		t.Errorf("agent at cpus 1 with GOMAXPROCS=2: %q, want no one-P line and the keys refused", out)
	}
	if runtime.NumCPU() < 2 {
		t.Logf("a limit above one CPU needs two on this machine; it has %d", runtime.NumCPU())
		return
	}
	req := execRequest(image)
	req.Resources.CPUs = 1.5
	more := provision(t, ctx, c, req)
	if out := sandboxShell(t, ctx, more.ExecutionID, agentAtInfo); strings.Contains(out, oneP) || !strings.Contains(out, "exit 1") {
		t.Errorf("agent at cpus 1.5: %q, want no one-P line and the keys refused", out)
	}
}
