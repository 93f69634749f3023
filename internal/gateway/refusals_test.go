package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/metrics"
)

// An agent refused for an hour (every 15 s, its backoff's cap) is logged
// once in full and once as a summary saying how often it repeated; another
// reason, or another host, is a spell of its own; after a quiet spell the
// next refusal is logged in full again, with what the last one left out.
func TestRefusalsLoggedOncePerSpell(t *testing.T) {
	var r refusals
	t0 := time.Unix(1_800_000_000, 0)
	var notes []refusalNote
	at := t0
	for i := range 241 { // an hour and one more
		at = t0.Add(time.Duration(i) * 15 * time.Second)
		if n := r.note("h", metrics.RefusedKeyMismatch, at); n.log {
			notes = append(notes, n)
		}
	}
	if len(notes) != 2 || notes[0].summary || notes[0].more != 0 ||
		!notes[1].summary || notes[1].more != 240 || notes[1].over != time.Hour {
		t.Fatalf("an hour of refusals every 15 s logged %+v, want the first in full and a summary of 240 more over 1h", notes)
	}
	if n := r.note("h", metrics.RefusedKeyUnproven, at); !n.log || n.summary {
		t.Errorf("another reason for the same host: %+v, want logged in full", n)
	}
	if n := r.note("h2", metrics.RefusedKeyMismatch, at); !n.log || n.summary {
		t.Errorf("another host: %+v, want logged in full", n)
	}
	at = at.Add(15 * time.Second)
	r.note("h", metrics.RefusedKeyMismatch, at) // one more, not logged
	at = at.Add(refusalQuiet)
	if n := r.note("h", metrics.RefusedKeyMismatch, at); !n.log || n.summary || n.more != 1 {
		t.Errorf("after a quiet %v: %+v, want logged in full with the 1 refusal left unlogged", refusalQuiet, n)
	}
}

// Agents of more hosts than refusalSpellsMax refused at once keep the set
// at its cap, dropping the oldest spell: its host's next refusal is logged
// again, the newest hosts' are not.
func TestRefusalsBounded(t *testing.T) {
	var r refusals
	t0 := time.Unix(1_800_000_000, 0)
	// A few past the cap: each refusal of a new host scans the full set
	// twice, and 3 × the cap took 25-160 s under -race on a loaded
	// machine, the slowest test of the package.
	n := refusalSpellsMax + 3
	for i := range n {
		r.note(fmt.Sprint("h", i), metrics.RefusedKeyMismatch, t0.Add(time.Duration(i)*time.Millisecond))
		r.refused(fmt.Sprint("h", i), metrics.RefusedKeyMismatch, t0.Add(time.Duration(i)*time.Millisecond))
	}
	if len(r.spells) > refusalSpellsMax {
		t.Fatalf("%d spells remembered after %d hosts, want at most %d", len(r.spells), n, refusalSpellsMax)
	}
	if len(r.latest) > refusalSpellsMax {
		t.Fatalf("%d hosts' last refusals remembered after %d hosts, want at most %d", len(r.latest), n, refusalSpellsMax)
	}
	at := t0.Add(time.Duration(n) * time.Millisecond)
	if why := r.why("h1", at); !strings.Contains(why, "another host key") {
		t.Errorf("h1's last refusal: %q", why)
	}
	if why := r.why("h1", at.Add(refusalQuiet)); why != "" {
		t.Errorf("h1's refusal a quiet spell later: %q", why)
	}
	if note := r.note(fmt.Sprint("h", n-1), metrics.RefusedKeyMismatch, at); note.log {
		t.Error("the newest host's second refusal was logged again")
	}
	if note := r.note("h0", metrics.RefusedKeyMismatch, at); !note.log {
		t.Error("the oldest host's spell was kept over newer ones")
	}
}

// An impostor that retries with a wrong host key is refused each time
// (and each is counted), but logged once.
func TestImpostorRefusalLoggedOnce(t *testing.T) {
	e := newEnv(t, nil)
	var logs testenv.LogBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
	agentTok := e.token(store.RoleAgent, "h1")
	_, realKey := newKey(t)
	real, err := e.dialAgent(agentTok, realKey, hostgate.Info{})
	if err != nil {
		t.Fatal(err)
	}
	defer real.close()
	_, otherKey := newKey(t)
	const tries = 5
	for range tries {
		_, err := e.dialAgent(agentTok, otherKey, hostgate.Info{})
		var he *bytestream.HandshakeError
		if !errors.As(err, &he) || he.StatusCode != http.StatusConflict {
			t.Fatalf("impostor: %v, want a 409", err)
		}
	}
	if n := strings.Count(logs.String(), "agent refused: host key differs"); n != 1 {
		t.Errorf("%d refusals logged %d times, want once:\n%s", tries, n, logs.String())
	}
	want := fmt.Sprintf(`hostgate_agent_refusals_total{reason="key_mismatch"} %d`, tries)
	if m := e.metricsText(); !strings.Contains(m, want) {
		t.Errorf("metrics lack %q", want)
	}
}

// TestShutdownCutsKeyProofAsShutdown: a key proof, or the pinning of the
// proven key, that the gateway's own shutdown cuts short is no refusal of
// the agent. It was counted as key_unproven (key_not_pinned) and logged as
// "agent refused: it did not prove it holds the host key" ("the host key
// could not be pinned"), which sends an admin reading the log after a
// restart looking for a fault in a host that had none.
func TestShutdownCutsKeyProofAsShutdown(t *testing.T) {
	check := func(t *testing.T, e *env, logs *testenv.LogBuffer) {
		t.Helper()
		if strings.Contains(logs.String(), "agent refused") {
			t.Errorf("a proof the shutdown cut is logged as the agent's failure:\n%s", logs.String())
		}
		if !strings.Contains(logs.String(), "the gateway is shutting down") {
			t.Errorf("the proof's end is not logged as the shutdown:\n%s", logs.String())
		}
		m := e.metricsText()
		for _, bad := range []string{`hostgate_agent_refusals_total{reason="key_unproven"}`, `hostgate_agent_refusals_total{reason="key_not_pinned"}`, `hostgate_tunnel_connects_total{result="refused"}`} {
			if l := metricLine(m, bad); l != "" && l != bad+" 0" {
				t.Errorf("a proof the shutdown cut is counted as a refusal: %s", l)
			}
		}
	}
	t.Run("proof", func(t *testing.T) {
		e := newEnv(t, nil)
		var logs testenv.LogBuffer
		e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
		agentTok := e.token(store.RoleAgent, "h1")
		_, key := newKey(t)
		h := http.Header{}
		h.Set("Authorization", "Bearer "+agentTok)
		h.Set(wire.HeaderHostKey, key)
		// It never opens its mux: its proof waits, until the shutdown.
		silent, resp, err := bytestream.DialWebSocket(e.ctx, e.ts.URL+wire.ConnectPath, &bytestream.WebSocketOptions{Header: h})
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		if resp.Header.Get(wire.HeaderKeyProof) == "" {
			t.Fatal("a first enrollment was not asked for a proof")
		}
		if err := e.srv.Close(); err != nil { // returns once the handler has
			t.Fatal(err)
		}
		check(t, e, &logs)
	})
	t.Run("pin", func(t *testing.T) {
		var es *enrollStalled
		e := newEnvWrapped(t, nil, func(st store.Store) store.Store {
			es = &enrollStalled{Store: st, entered: make(chan struct{})}
			return es
		})
		var logs testenv.LogBuffer
		e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
		agentTok := e.token(store.RoleAgent, "h1")
		_, key := newKey(t)
		dialed := make(chan error, 1)
		go func() {
			a, err := e.dialAgent(agentTok, key, hostgate.Info{})
			if err == nil {
				a.close()
			}
			dialed <- err
		}()
		select {
		case <-es.entered: // proven: the gateway pins it
		case err := <-dialed:
			t.Fatalf("the agent's connect ended before its key was pinned: %v", err)
		}
		if err := e.srv.Close(); err != nil {
			t.Fatal(err)
		}
		<-dialed
		check(t, e, &logs)
	})
}

// enrollStalled is a store whose Enroll waits for its ctx to end: the
// gateway's shutdown arriving as it pins a proven key.
type enrollStalled struct {
	store.Store
	entered chan struct{}
}

func (s *enrollStalled) Enroll(ctx context.Context, en store.Enrollment) (store.Host, error) {
	close(s.entered)
	<-ctx.Done()
	return s.Store.Enroll(ctx, en)
}
