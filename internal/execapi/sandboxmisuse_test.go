package execapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/agent"
	"github.com/hostgate/hostgate/internal/gatewaytest"
	"github.com/hostgate/hostgate/internal/testenv"
)

// syncBuffer is a log sink the session's receive loop and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Sandbox code that took over its agent can open streams toward the
// gateway on its stdio tunnel, which a real agent never does. They were
// refused (the tunnel's MaxStreams) but nothing said so: the machine
// agents' tunnels log it (agent misuse), the sandboxes' did not, so an
// operator never heard of a sandbox probing the gateway. The refusal is
// logged, once per attachment, naming the execution; and counted in the
// gateway's hostgate_agent_misuse_total, which had counted only the
// machine agents' (its tunnel configuration, the gateway's TunnelMux as
// cmd/gateway passes it, did not count).
func TestSandboxAgentOpeningStreamsLogged(t *testing.T) {
	ex := newFakeExecutions()
	g := gatewaytest.New(t, context.Background(), nil, nil)
	srv, st := g.Server, g.Store
	reg := srv.Tunnels()
	var logs syncBuffer
	var wg sync.WaitGroup
	defer wg.Wait()
	opened := make(chan error, 1)
	hostile := func(ctx context.Context, _ string, _ []string, _ io.Writer) (Stdio, error) {
		gw, ag := testenv.TCPPair(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { _ = ag.Close() }()
			if _, err := agent.ReadStdioKeys(ag); err != nil {
				opened <- err
				return
			}
			sess, err := bytestream.MuxServer(ag, nil)
			if err != nil {
				opened <- err
				return
			}
			defer func() { _ = sess.Close() }()
			// More than the tunnel allows: a real agent opens none.
			for range 8 {
				st, err := sess.OpenStream()
				if err != nil {
					break
				}
				_, _ = st.Write([]byte("hello, gateway"))
			}
			// The gateway's receive loop handled the opens (and told
			// OnMisuse) before it answers this ping, sent after them.
			_, err = sess.Ping()
			select {
			case opened <- err:
			default:
			}
			select {
			case <-ctx.Done():
			case <-sess.CloseChan():
			}
		}()
		return gw.(*net.TCPConn), nil
	}
	agents := NewAgents(hostile, func(ctx context.Context, id string) error {
		_, err := ex.Get(ctx, id)
		return err
	}, st, reg, "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGyQ2m0s7yJ1l7Fqzvq2jk8o0nE1iYwq7m4fP3nYwq1d",
		&AgentsConfig{MaxRestarts: 1, ReadyTimeout: wait, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Mux: srv.TunnelMux()})
	defer agents.Close()
	api, err := New(ex, &Config{Authorize: func(http.ResponseWriter, *http.Request) bool { return true }, Agents: agents})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	b, _ := json.Marshal(provisionBody())
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/executions", bytes.NewReader(b)))
	if rec.Code != http.StatusCreated {
		t.Fatalf("provision: %d %s", rec.Code, rec.Body)
	}
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	id, _ := body["executionId"].(string)
	got := logs.String()
	if n := strings.Count(got, "opened more streams"); n != 1 {
		t.Fatalf("the hostile agent's streams were logged %d times, want once:\n%s", n, got)
	}
	if !strings.Contains(got, "execution="+id) {
		t.Fatalf("the misuse line does not name execution %s:\n%s", id, got)
	}
	rec = httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	// Eight opened where the tunnel takes one.
	const want = `hostgate_agent_misuse_total{kind="stream_refused"} 7`
	if !strings.Contains(rec.Body.String(), want) {
		t.Fatalf("/metrics (%d) lacks %s:\n%s", rec.Code, want, grepLines(rec.Body.String(), "hostgate_agent_misuse_total"))
	}
}

// grepLines is the lines of s that hold word.
func grepLines(s, word string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if strings.Contains(line, word) {
			b.WriteString(line)
		}
	}
	return b.String()
}
