package gateway

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/store"
)

// TestLoadManyAgentsAndSessions connects many agents and runs many
// concurrent relayed sessions through one gateway, checking every byte
// comes back. Bounded in count and time: 100 agents and 100 sessions by
// default (HOSTGATE_LOAD_AGENTS, HOSTGATE_LOAD_SESSIONS raise it, e.g.
// 500/200), everything under one 120 s deadline. It reports heap and stacks per
// tunnel; gateway and agent ends live in this one process, so that is an
// upper bound for the gateway's share.
func TestLoadManyAgentsAndSessions(t *testing.T) {
	agents, sessions := envInt("HOSTGATE_LOAD_AGENTS", 100), envInt("HOSTGATE_LOAD_SESSIONS", 100)
	e := newEnv(t, &Config{AuthFailureLimit: 1 << 20})
	ctx, cancel := context.WithTimeout(e.ctx, 120*time.Second)
	defer cancel()
	e.ctx = ctx
	admin := e.token(store.RoleAdmin)
	toks := make([]string, agents)
	for i := range toks {
		toks[i] = e.token(store.RoleAgent, fmt.Sprint("load", i))
	}
	before := heapInuse()
	// Agents enroll concurrently, 16 at a time.
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range agents {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, k := newKey(t)
			if _, err := e.dialAgent(toks[i], k, hostgate.Info{Kind: "load"}); err != nil {
				t.Errorf("agent %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if n := e.srv.Tunnels().Len(); n != agents {
		t.Fatalf("%d tunnels registered, want %d", n, agents)
	}
	perTunnel := (heapInuse() - before) / uint64(agents)
	t.Logf("%d tunnels: heap+stacks %.1f KiB per tunnel (gateway + agent ends)", agents, float64(perTunnel)/1024)

	start := time.Now()
	for i := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := e.relay(fmt.Sprint("load", i%agents), admin)
			if err != nil {
				t.Errorf("session %d: %v", i, err)
				return
			}
			defer c.Close()
			if err := echoCheck(c, 64<<10); err != nil {
				t.Errorf("session %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d concurrent sessions × 64 KiB echoed in %v", sessions, time.Since(start).Round(time.Millisecond))
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func heapInuse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}
