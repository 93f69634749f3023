package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
)

// readyTTL is how long /readyz reuses its answer. Load balancers poll it
// every few seconds each, and the store check writes (see
// store.Store.CheckWrite): every poll must not cost a write.
const readyTTL = 5 * time.Second

// readyTimeout bounds one check.
const readyTimeout = 2 * time.Second

// readiness is what /readyz checks and its last answer. mu is held for a
// whole probe, so concurrent polls of a stale answer wait for one probe
// instead of each running their own.
type readiness struct {
	mu     sync.Mutex
	ttl    time.Duration // readyTTL; tests set 0
	checks []readyCheck  // AddReadyCheck's, after the store's own
	at     time.Time     // when results were found
	result []checkResult
	disk   *diskWatch // the state dir's free space, if watched
	low    string     // why disk is low, or ""
	// failing holds each check that failed its last probe: when it began
	// failing, how many probes it failed and when it was last logged. A
	// check's failure is logged when it begins, then at most once per
	// readyRelog while it goes on, and its recovery once: a load balancer
	// polling through a disk-full outage logged two lines per 5 s.
	failing map[string]*failRun
}

// readyRelog is how often a check that goes on failing is logged again.
const readyRelog = 10 * time.Minute

type failRun struct {
	since, logged time.Time
	probes        int
}

type readyCheck struct {
	name  string
	check func(context.Context) error
}

type checkResult struct {
	name string
	err  error
}

// AddReadyCheck adds a dependency /readyz reports (as name) and that makes
// the gateway not ready while check fails, such as the Docker engine when
// executions are on. check gets a context of a few seconds; its result is
// reused for a few seconds. Call it before serving.
func (s *Server) AddReadyCheck(name string, check func(ctx context.Context) error) {
	s.ready.mu.Lock()
	defer s.ready.mu.Unlock()
	s.ready.checks = append(s.ready.checks, readyCheck{name, check})
}

// probe runs every check at most once per ttl and returns the results in
// order: the store's, the audit log's, then AddReadyCheck's; and why the
// state dir's filesystem is low on space, or "".
func (s *Server) probe() (_ []checkResult, lowSpace string) {
	r := &s.ready
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.result != nil && time.Since(r.at) < r.ttl {
		return r.result, r.low
	}
	if r.disk != nil {
		r.low = r.disk.check(s)
	}
	// Not the request's context: the answer is shared by every poll of
	// the next ttl, and a poller hanging up must not fail it for them.
	ctx, cancel := context.WithTimeout(s.ctx, readyTimeout)
	defer cancel()
	checks := append([]readyCheck{{"store", s.checkStore}}, r.checks...)
	began := s.auditLog.writeBegan()
	res := make([]checkResult, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		res[i].name = c.name
		wg.Go(func() { res[i].err = c.check(ctx) })
	}
	wg.Wait()
	// The audit log fails with its writes, which the store check made:
	// one that went through ends an audit outage (no session may come to
	// end it while the gateway is out of its load balancer's pool).
	if res[0].err == nil {
		s.auditLog.recovered(s, began)
	}
	audit := checkResult{name: "audit", err: s.auditLog.failure()}
	res = append(res[:1], append([]checkResult{audit}, res[1:]...)...)
	r.logChecks(s.logger, res, time.Now())
	r.result, r.at = res, time.Now()
	return res, r.low
}

// logChecks logs a check that begins to fail (with its error), one that
// goes on failing every readyRelog (with how long and how many probes),
// and one that passes again. Called with mu held.
func (r *readiness) logChecks(logger *slog.Logger, res []checkResult, now time.Time) {
	for _, c := range res {
		run := r.failing[c.name]
		switch {
		case c.err != nil && run == nil:
			if r.failing == nil {
				r.failing = map[string]*failRun{}
			}
			r.failing[c.name] = &failRun{since: now, logged: now, probes: 1}
			logger.Warn("readyz: a check failed", "check", c.name, "err", c.err,
				"next", "logged again when it passes, or in "+readyRelog.String()+" if it still fails")
		case c.err != nil:
			run.probes++
			if now.Sub(run.logged) >= readyRelog {
				run.logged = now
				logger.Warn("readyz: a check failed", "check", c.name, "err", c.err,
					"failingFor", now.Sub(run.since).Round(time.Second).String(), "probes", run.probes)
			}
		case run != nil:
			delete(r.failing, c.name)
			logger.Info("readyz: a check passes again", "check", c.name,
				"failedFor", now.Sub(run.since).Round(time.Second).String(), "probes", run.probes)
		}
	}
}

// checkFailure is what /readyz says of a failed check. The answer is
// unauthenticated, so it says which dependency failed but not how: the
// errors name files (the state database's path) and addresses, which
// probe logs instead.
func checkFailure(name string) string {
	switch name {
	case "store":
		return "the state database does not answer or refuses writes; the gateway's log has why"
	case "audit":
		return "the audit log cannot be written; the gateway's log has why"
	}
	return "failed; the gateway's log has why"
}

// checkStore: the store answers a read and takes a write.
func (s *Server) checkStore(ctx context.Context) error {
	if err := s.store.Ping(ctx); err != nil {
		return err
	}
	return s.store.CheckWrite(ctx)
}

// readyBody is /readyz's answer: status "ready", "degraded" (ready, but
// the state dir's filesystem is low on space) or "not_ready", and each
// check's "ok" or what failed; a failure also carries the error envelope
// every 503 has.
type readyBody struct {
	Status  string            `json:"status"`
	Tunnels int               `json:"tunnels"`
	Checks  map[string]string `json:"checks"`
	Error   *wire.Error       `json:"error,omitempty"`
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		WriteError(w, http.StatusServiceUnavailable, "shutting_down", "gateway is shutting down")
		return
	}
	body := readyBody{Status: "ready", Tunnels: s.tunnels.Len(), Checks: map[string]string{}}
	var failed []string
	results, lowSpace := s.probe()
	if s.ready.disk != nil {
		body.Checks["disk"] = "ok"
	}
	if lowSpace != "" {
		// Writes still work: a load balancer keeps the gateway, and
		// monitoring sees it first here.
		body.Status = "degraded"
		body.Checks["disk"] = lowSpace
	}
	for _, c := range results {
		if c.err == nil {
			body.Checks[c.name] = "ok"
			continue
		}
		why := checkFailure(c.name)
		body.Checks[c.name] = why
		failed = append(failed, c.name+": "+why)
	}
	if len(failed) == 0 {
		WriteJSON(w, http.StatusOK, body)
		return
	}
	body.Status = "not_ready"
	body.Error = &wire.Error{Code: "not_ready", Message: strings.Join(failed, "; ")}
	WriteJSON(w, http.StatusServiceUnavailable, body)
}

// auditLog tracks failures to write the audit log. Sessions go on when it
// fails (refusing them would turn a full disk into an outage of every
// host), so the failure must be loud where operators look: once in the
// log per outage, not once per session, in /readyz and in
// hostgate_audit_write_failures_total.
type auditLog struct {
	mu    sync.Mutex
	first error // the outage's first failure; nil when writing
	lost  int   // sessions not recorded in this outage
	// outages counts outages begun. Only a write begun during the
	// current one ends it: one begun before the disk filled may go
	// through after a later one failed, and ended the outage then, so
	// that with --audit-required a new session got in unrecorded.
	outages uint64
}

// writeBegan is the outage count as a write begins, for endLocked.
func (a *auditLog) writeBegan() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.outages
}

// recordAudit writes one audit entry, and returns the store's error when
// it could not: a direct session's admission, which is refused rather than
// let in unrecorded under --audit-required.
func (s *Server) recordAudit(ctx context.Context, e store.Session) error {
	a := &s.auditLog
	began := a.writeBegan()
	err := s.store.RecordSession(ctx, e)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err == nil {
		a.endLocked(s, began)
		return nil
	}
	s.metrics.AuditWriteFailures.Inc()
	a.lost++
	if a.first != nil {
		return err
	}
	a.first = err
	a.outages++
	s.metrics.AuditFailing.Set(1)
	// The one line of the outage that names the file and what to do (err
	// does, a store.WriteError); the 503s and /readyz, sent before
	// authentication, point here.
	msg := "audit log: the state database refused a session's entry; sessions go on unrecorded until it takes writes again (logged once per outage; /readyz and hostgate_audit_write_failures_total show it)"
	if s.cfg.AuditRequired {
		msg = "audit log: the state database refused a session's entry; with --audit-required, new sessions, certificates, execs, shares and logins are refused (503 audit_unavailable) until it takes writes again, while open sessions go on (logged once per outage; /readyz and hostgate_audit_failing show it)"
	}
	args := []any{"host", e.HostID, "kind", e.Kind, "token", e.TokenName, "err", err}
	if s.cfg.StateDir != "" {
		args = append(args, "stateDir", s.cfg.StateDir)
	}
	s.logger.Error(msg, args...)
	return err
}

// recovered ends the outage once the store took a write begun during it
// (began is writeBegan's count when the write began).
func (a *auditLog) recovered(s *Server, began uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.endLocked(s, began)
}

func (a *auditLog) endLocked(s *Server, began uint64) {
	if a.first == nil || began != a.outages {
		return
	}
	s.logger.Warn("audit log: the state database takes writes again", "unrecordedSessions", a.lost)
	a.first, a.lost = nil, 0
	s.metrics.AuditFailing.Set(0)
}

// failure is the current outage's first failure, or nil.
func (a *auditLog) failure() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.first == nil {
		return nil
	}
	return fmt.Errorf("%d sessions unrecorded since: %w", a.lost, a.first)
}
