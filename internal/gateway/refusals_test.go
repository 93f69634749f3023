package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
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
