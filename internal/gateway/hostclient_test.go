//go:build unix

package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/agent"
	"github.com/hostgate/hostgate/internal/store"
)

// connectAgent runs a real agent for host id until stop is called or the
// test ends, and returns once its tunnel is up.
func (e *env) connectAgent(t *testing.T, id string) (stop func()) {
	t.Helper()
	tok := e.token(store.RoleAgent, id)
	up := make(chan string, 4)
	actx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() {
		done <- agent.Connect(actx, &agent.ConnectConfig{GatewayURL: e.ts.URL, Token: tok, StateDir: t.TempDir(),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OnTunnel: func(id string) { up <- id }})
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	select {
	case <-up:
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not connect")
	}
	return stop
}

// TestHostClientsForgetDeadClients: a shared client whose connection
// ended leaves HostClients at once, not only when its host is asked for
// again. Executions are hosts whose ids never come back, so each sandbox
// whose preview or terminal the gateway had used kept its dead SSH
// client (its transport's buffers, about 80 KiB) for the gateway's life.
func TestHostClientsForgetDeadClients(t *testing.T) {
	e := newEnv(t, nil)
	stop := e.connectAgent(t, "box")
	hc, err := NewHostClients(e.srv)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	c, err := hc.Get(e.ctx, "box")
	if err != nil {
		t.Fatal(err)
	}
	stop() // the host goes away for good
	select {
	case <-c.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the shared client outlived its host's tunnel")
	}
	for i := 0; ; i++ {
		hc.mu.Lock()
		n := len(hc.clients)
		hc.mu.Unlock()
		if n == 0 {
			break
		}
		if i == 300 { // 30 s
			t.Fatalf("HostClients still holds %d dead client(s)", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDialLostAtShutdown: a web terminal cut by the gateway's shutdown
// says so without "reconnect", the relays' word to programs: the page
// showed "the gateway is shutting down; reconnect; its shell ended:
// reload the page for a new terminal", two instructions, one of them
// wrong for a shell that ended with the gateway.
func TestDialLostAtShutdown(t *testing.T) {
	e := newEnv(t, nil)
	e.connectAgent(t, "box")
	hc, err := NewHostClients(e.srv)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	c, lost, err := hc.DialLost(e.ctx, "box", "test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if why := lost(); why != nil {
		t.Fatalf("lost before anything ended: %v", why)
	}
	_ = e.srv.Close()
	why := lost()
	if why == nil || why.Error() != "host box: the gateway is shutting down" {
		t.Fatalf("lost at shutdown: %v, want \"host box: the gateway is shutting down\"", why)
	}
}

// TestDialLostOfEndedExecution: a web terminal whose host, an execution,
// ended for good says so, why, and to start a new sandbox, matching
// ErrExecutionEnded (the page drops its "reload the page", which only
// finds the sandbox gone); a host whose agent merely went is not marked.
func TestDialLostOfEndedExecution(t *testing.T) {
	e := newEnv(t, nil)
	e.srv.SetHostEnded(func(_ context.Context, id string) (string, time.Time) {
		if id == "ended" {
			return "terminated", time.Now()
		}
		return "", time.Time{}
	})
	hc, err := NewHostClients(e.srv)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	for id, want := range map[string]string{
		"ended": "host ended: its execution ended (reason terminated): start a new sandbox",
		"went":  "host went: its agent disconnected from the gateway",
	} {
		stop := e.connectAgent(t, id)
		c, lost, err := hc.DialLost(e.ctx, id, "test")
		if err != nil {
			t.Fatal(err)
		}
		stop()
		_ = c.Wait()
		why := lost()
		if why == nil || why.Error() != want || errors.Is(why, ErrExecutionEnded) != (id == "ended") {
			t.Errorf("lost of %s: %v (ErrExecutionEnded %v), want %q", id, why, errors.Is(why, ErrExecutionEnded), want)
		}
		_ = c.Close()
	}
}
