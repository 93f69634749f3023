package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/internal/agent"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/sshlayer"
)

// vmRSS is a process's resident set size in KiB, from /proc.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kib
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// TestGatewayLoad: 500 dial-out agents (simulated in this process, each
// with its own token, state dir and host key) and 200 concurrent Go client
// sessions through one gateway process. Every session's output must be
// its own; the gateway's memory per tunnel is reported.
func TestGatewayLoad(t *testing.T) {
	agents, sessions := 500, 200
	if testing.Short() {
		agents = 50
	}
	g := startGateway(t, "")
	ctx := testCtx(t, 150*time.Second)

	// Agent tokens straight in the gateway's database: the CLI would take
	// a process per token. The store is built for a second writer.
	st, err := store.Open(ctx, filepath.Join(g.stateDir, "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, agents)
	tokens := make([]string, agents)
	for i := range agents {
		ids[i] = fmt.Sprintf("load-%03d", i)
		if tokens[i], _, err = st.CreateToken(ctx, store.TokenSpec{Role: store.RoleAgent, Hosts: []string{ids[i]}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	gwPID := g.proc.cmd.Process.Pid
	before := vmRSS(t, gwPID)
	start := time.Now()

	// The agents: Connect goroutines owned by this test, stopped by
	// cancelling actx and waited for.
	// Two halves with their own contexts: the first half leaves before the
	// gateway stops, the second is live when it does.
	actxs := [2]context.Context{}
	var cancels [2]context.CancelFunc
	actxs[0], cancels[0] = context.WithCancel(ctx)
	actxs[1], cancels[1] = context.WithCancel(ctx)
	var (
		wg      [2]sync.WaitGroup
		mu      sync.Mutex
		up      = map[string]bool{}
		allUp   = make(chan struct{})
		errs    = make([]error, agents)
		stopped = false
	)
	stop := func(half int) {
		cancels[half]()
		wg[half].Wait()
	}
	defer func() {
		if !stopped {
			stop(0)
			stop(1)
		}
	}()
	for i := range agents {
		half := i % 2
		wg[half].Add(1)
		go func() {
			defer wg[half].Done()
			errs[i] = agent.Connect(actxs[half], &agent.ConnectConfig{
				GatewayURL: g.url, Token: tokens[i], HostID: ids[i], StateDir: t.TempDir(),
				MinBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second,
				// 500 agents share this process's two cores under -race,
				// where a real agent has a machine: the 10 s handshake
				// bound is for one agent's load, not for this.
				Server: func(sc *sshlayer.ServerConfig) { sc.HandshakeTimeout = time.Minute },
				OnTunnel: func(id string) {
					mu.Lock()
					defer mu.Unlock()
					if !up[id] {
						up[id] = true
						if len(up) == agents {
							close(allUp)
						}
					}
				},
			})
		}()
	}
	select {
	case <-allUp:
	case <-time.After(90 * time.Second):
		mu.Lock()
		n := len(up)
		mu.Unlock()
		t.Fatalf("only %d of %d agents connected within 90s", n, agents)
	}
	connectTime := time.Since(start)

	// The gateway agrees: every host listed and connected.
	c, err := client.New(g.url, g.admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := c.Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	connected := 0
	for _, r := range recs {
		if r.Connected && strings.HasPrefix(r.ID, "load-") {
			connected++
		}
	}
	if connected != agents {
		t.Fatalf("gateway lists %d of %d load hosts connected", connected, agents)
	}
	after := vmRSS(t, gwPID)
	perTunnel := float64(after-before) / float64(agents)
	t.Logf("gateway VmRSS: %d KiB idle, %d KiB with %d tunnels (%.2fx idle): %.1f KiB per tunnel; all up in %v",
		before, after, agents, float64(after)/float64(before), perTunnel, connectTime.Round(time.Millisecond))

	// 200 concurrent sessions through random tunnels, each with its own
	// SSH connection; every output must be exactly its own number.
	sstart := time.Now()
	type result struct {
		i   int
		id  string
		out string
		err error
	}
	results := make(chan result, sessions)
	var swg sync.WaitGroup
	// All 200 SSH connections are open together and run their commands at
	// once (the barrier); only the handshakes are paced, 32 at a time, as
	// every simulated agent's SSH server shares this process's CPU.
	dialing := make(chan struct{}, 32)
	var dialed sync.WaitGroup
	dialed.Add(sessions)
	barrier := make(chan struct{})
	go func() { dialed.Wait(); close(barrier) }()
	for i := range sessions {
		id := ids[rand.IntN(agents)]
		swg.Add(1)
		go func() {
			defer swg.Done()
			sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
			defer cancel()
			dialing <- struct{}{}
			h, err := c.Dial(sctx, id)
			<-dialing
			dialed.Done()
			if err != nil {
				results <- result{i, id, "", fmt.Errorf("dial: %w", err)}
				return
			}
			defer h.Close()
			<-barrier
			res, err := h.Exec(sctx, []string{"echo", strconv.Itoa(i)}, hostgate.ExecOptions{})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
			}
			out := ""
			if res != nil {
				out = string(res.Stdout)
			}
			results <- result{i, id, out, err}
		}()
	}
	swg.Wait()
	close(results)
	seen := make([]bool, sessions)
	failed := 0
	for r := range results {
		if r.err != nil || r.out != strconv.Itoa(r.i)+"\n" {
			failed++
			if failed <= 5 {
				t.Errorf("session %d via %s: %q %v", r.i, r.id, r.out, r.err)
			}
			continue
		}
		seen[r.i] = true
	}
	for i, ok := range seen {
		if !ok && failed == 0 {
			t.Errorf("session %d has no result", i)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d sessions failed or lost output", failed, sessions)
	}
	sessTime := time.Since(sstart)
	t.Logf("%d concurrent sessions (dial + certificate + SSH + exec) through %d tunnels in %v (%.0f sessions/s)",
		sessions, agents, sessTime.Round(time.Millisecond), float64(sessions)/sessTime.Seconds())

	// Gauges agree and drain: every relayed stream ended with its session.
	waitMetric(t, g, "hostgate_tunnels_connected", float64(agents))
	waitMetric(t, g, "hostgate_streams_open", 0)
	t.Logf("gateway VmRSS after the sessions ended: %d KiB", vmRSS(t, gwPID))

	// Half the agents leave (a clean stop returns nil) and the gateway sees
	// exactly them go.
	stop(0)
	for i := 0; i < agents; i += 2 {
		if errs[i] != nil {
			t.Fatalf("agent %s: %v", ids[i], errs[i])
		}
	}
	waitMetric(t, g, "hostgate_tunnels_connected", float64(agents/2))
	t.Logf("gateway VmRSS with %d tunnels left: %d KiB", agents-agents/2, vmRSS(t, gwPID))
	if recs, err = c.Hosts(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		var i int
		if _, err := fmt.Sscanf(r.ID, "load-%d", &i); err == nil && r.Connected != (i%2 == 1) {
			t.Fatalf("host %s connected=%v after the even agents stopped", r.ID, r.Connected)
		}
	}

	// SIGTERM the gateway with the other half live: it exits cleanly
	// (within the harness's 10 s before SIGKILL), then those agents stop.
	g.proc.stop()
	if g.proc.err != nil {
		t.Fatalf("gateway with %d live tunnels did not exit cleanly on SIGTERM: %v", agents/2, g.proc.err)
	}
	stop(1)
	stopped = true
	for i := 1; i < agents; i += 2 {
		if errs[i] != nil {
			t.Fatalf("agent %s: %v", ids[i], errs[i])
		}
	}
}

// waitMetric waits (bounded) until the gateway's /metrics shows name (a
// metric without labels) at want.
func waitMetric(t *testing.T, g *gw, name string, want float64) {
	t.Helper()
	waitMetricFunc(t, g, name, fmt.Sprint(want), func(f float64) bool { return f == want })
}

// waitMetricAtLeast waits (bounded) until the gateway's /metrics shows
// series (a name with its labels, as /metrics prints it) at least at want.
func waitMetricAtLeast(t *testing.T, g *gw, series string, want float64) {
	t.Helper()
	waitMetricFunc(t, g, series, fmt.Sprint("at least ", want), func(f float64) bool { return f >= want })
}

// waitMetricFunc waits (bounded) until name on the gateway's /metrics has a
// value good accepts; want describes it.
func waitMetricFunc(t *testing.T, g *gw, name, want string, good func(float64) bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for {
		code, body := g.api("GET", "/metrics", g.admin, nil)
		if code == http.StatusOK {
			last = "(missing)"
			for _, line := range strings.Split(string(body), "\n") {
				if v, ok := strings.CutPrefix(line, name+" "); ok {
					last = v
					if f, err := strconv.ParseFloat(v, 64); err == nil && good(f) {
						return
					}
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("metric %s is %s after 60s, want %s", name, last, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
