package gateway

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hostgate/hostgate/metrics"
)

// refusalQuiet is how long a host's agent goes unrefused (for one reason)
// before its next refusal starts a new spell, logged in full again: a
// refused agent retries every 15-30 s at its backoff's cap, so a longer
// gap means it was stopped or fixed meanwhile.
const refusalQuiet = 10 * time.Minute

// refusalSummaryEvery is how often a spell that goes on is summed up in
// the log, so an operator still hears of an agent refused all day.
const refusalSummaryEvery = time.Hour

// refusalSpellsMax caps the spells remembered: one per (host, reason), and
// every host's agent token can start one.
const refusalSpellsMax = 4096

// spellKeySignature is logSpell's reason for an agent's key signature that
// was not accepted: not a refusal (the agent is asked to prove its key in
// an SSH key exchange instead), but it repeats with every attempt while the
// proof fails too.
const spellKeySignature = "key_signature"

// spellKindDocker is logSpell's reason for an agent that claims the kind
// of the gateway's own sandboxes.
const spellKindDocker = "kind_docker"

// spellUnsignedReplace is logSpell's reason for an unsigned connection
// that names the pinned key while a signed agent serves the host.
const spellUnsignedReplace = "unsigned_replace"

// refusals turns an agent's refusals into log lines: the first of a spell
// in full, then a summary each refusalSummaryEvery while it goes on. An
// agent with a wrong host key retries every 15-30 s for as long as it
// runs, and a fleet of them logged a line each time; the metric
// (hostgate_agent_refusals_total) counts every one.
type refusals struct {
	mu     sync.Mutex
	spells map[refusalKey]*refusalSpell
	// latest is each host's last refusal until its agent is served again,
	// for a caller who finds the host offline: a host whose agent is
	// refused (a reinstalled machine's new host key) said only "not
	// connected". At most refusalSpellsMax.
	latest map[string]latestRefusal
}

type latestRefusal struct {
	reason string
	at     time.Time
	agent  string // for refusedByAgent: the agent's reason, sanitized
}

// agentRefuses is latestRefusal's reason for an agent that refused the
// gateway (closed its tunnel with status 1008), not the other way round.
const agentRefuses = "agent_refuses"

type refusalKey struct{ host, reason string }

type refusalSpell struct {
	logged time.Time // the spell's last log line
	last   time.Time // the spell's last refusal
	quiet  int       // refusals since logged, not logged
}

// refusalNote says what to log about one refusal.
type refusalNote struct {
	log     bool          // log this refusal
	summary bool          // as a summary: the spell goes on
	more    int           // refusals not logged since the line before
	over    time.Duration // how long those took
}

// attrs are the note's log attributes beyond the refusal's own.
func (n refusalNote) attrs() []any {
	if n.more == 0 {
		return nil
	}
	return []any{"refusedMore", n.more, "over", n.over.Round(time.Second).String()}
}

// note records a refusal of host's agent for reason at now.
func (r *refusals) note(host, reason string, now time.Time) refusalNote {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.spells == nil {
		r.spells = map[refusalKey]*refusalSpell{}
	}
	k := refusalKey{host, reason}
	sp, ok := r.spells[k]
	if !ok {
		r.makeRoom(now)
		r.spells[k] = &refusalSpell{logged: now, last: now}
		return refusalNote{log: true}
	}
	if now.Sub(sp.last) >= refusalQuiet {
		// A new spell: what the last one left unlogged goes with it.
		n := refusalNote{log: true, more: sp.quiet, over: sp.last.Sub(sp.logged)}
		*sp = refusalSpell{logged: now, last: now}
		return n
	}
	sp.last = now
	sp.quiet++
	if now.Sub(sp.logged) < refusalSummaryEvery {
		return refusalNote{}
	}
	n := refusalNote{log: true, summary: true, more: sp.quiet, over: now.Sub(sp.logged)}
	sp.logged, sp.quiet = now, 0
	return n
}

// refusedByAgent records that host's agent refused the gateway at now,
// saying why (its close frame's reason, at most 123 bytes): printable
// text only, and without the agent's own "agent refuses this gateway: ".
func (r *refusals) refusedByAgent(host, why string, now time.Time) {
	why = strings.TrimPrefix(why, "agent refuses this gateway: ")
	// Printable only: it reaches callers' 503 messages, which `gateway
	// proxy` and `gateway cert` print to a terminal, where C1 controls
	// (U+009B is CSI) act as ESC does and a bidi override (U+202E)
	// reverses the text after it. RuneError is what Map makes of bytes
	// that are not UTF-8, and prints.
	why = strings.Map(func(c rune) rune {
		if !unicode.IsPrint(c) || c == utf8.RuneError {
			return -1
		}
		return c
	}, why)
	if why == "" {
		why = "it gave no reason (its log says why)"
	}
	r.record(host, latestRefusal{reason: agentRefuses, at: now, agent: why})
}

// refused records host's refusal for reason at now as the one a caller
// finding the host offline hears of.
func (r *refusals) refused(host, reason string, now time.Time) {
	r.record(host, latestRefusal{reason: reason, at: now})
}

// record keeps l as host's latest refusal.
func (r *refusals) record(host string, l latestRefusal) {
	now := l.at
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.latest == nil {
		r.latest = map[string]latestRefusal{}
	}
	if _, ok := r.latest[host]; !ok && len(r.latest) >= refusalSpellsMax {
		for h, l := range r.latest {
			if now.Sub(l.at) >= refusalQuiet {
				delete(r.latest, h)
			}
		}
		if len(r.latest) >= refusalSpellsMax {
			return // a caller then hears "not connected" alone
		}
	}
	r.latest[host] = l
}

// served forgets host's last refusal: its agent is connected.
func (r *refusals) served(host string) {
	r.mu.Lock()
	delete(r.latest, host)
	r.mu.Unlock()
}

// why says, for a caller who finds host offline, why its agent was last
// refused, if that was within refusalQuiet (a refused agent asks again
// every 15-30 s) and it has not been served since; "" otherwise.
func (r *refusals) why(host string, now time.Time) string {
	r.mu.Lock()
	l, ok := r.latest[host]
	r.mu.Unlock()
	if !ok || now.Sub(l.at) >= refusalQuiet {
		return ""
	}
	if l.reason == agentRefuses {
		return fmt.Sprintf("its agent refused this gateway %s ago: %s", now.Sub(l.at).Round(time.Second), l.agent)
	}
	hint, ok := refusalHints[l.reason]
	if !ok {
		return ""
	}
	return fmt.Sprintf("its agent was refused %s ago: %s", now.Sub(l.at).Round(time.Second), strings.ReplaceAll(hint, "{host}", host))
}

// refusalHints say to a caller why a host's agent is refused, and who can
// fix it; no key or token is named.
var refusalHints = map[string]string{
	metrics.RefusedKeyMismatch:  "it presents another host key than the pinned one (if the machine was reinstalled, an admin runs `gateway host reset-key {host}`)",
	metrics.RefusedKeyUnproven:  "it did not prove it holds the host key it presents (the gateway's log says why)",
	metrics.RefusedKeyNotPinned: "its host key could not be pinned (the gateway's log says why)",
}

// makeRoom drops spells over quietly, and while still full the oldest, so
// agents of many hosts refused at once cannot grow the set without limit.
func (r *refusals) makeRoom(now time.Time) {
	if len(r.spells) < refusalSpellsMax {
		return
	}
	for k, sp := range r.spells {
		if now.Sub(sp.last) >= refusalQuiet {
			delete(r.spells, k)
		}
	}
	for len(r.spells) >= refusalSpellsMax {
		var oldest refusalKey
		var at time.Time
		for k, sp := range r.spells {
			if at.IsZero() || sp.last.Before(at) {
				oldest, at = k, sp.last
			}
		}
		delete(r.spells, oldest)
	}
}

// refuseAgent counts a refusal of host's agent for reason and logs it as
// logSpell does.
func (s *Server) refuseAgent(log *slog.Logger, host, reason, msg string, args ...any) {
	s.metrics.AgentRefusals.WithLabelValues(reason).Inc()
	s.logSpell(log, host, reason, msg, args...)
	// Not while another agent serves the host: that one's callers, if it
	// ends, would hear of an impostor's key as their host's.
	if !s.tunnels.Connected(host) {
		s.agentRefusals.refused(host, reason, time.Now())
	}
}

// logSpell logs msg with args the first time in a spell of host's agent
// being turned away for reason, and as a summary each refusalSummaryEvery
// while the spell goes on.
func (s *Server) logSpell(log *slog.Logger, host, reason, msg string, args ...any) {
	n := s.agentRefusals.note(host, reason, time.Now())
	switch {
	case !n.log:
		return
	case n.summary:
		msg = "still, as logged before: " + msg
	default:
		msg += "; logged again only in an hour if it goes on (with how often), or after 10 minutes without it"
	}
	log.Warn(msg, append(args, n.attrs()...)...)
}
