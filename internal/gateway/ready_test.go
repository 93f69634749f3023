package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/testenv"
)

// fullStore fails every write as a full disk does while full is set;
// reads go on.
type fullStore struct {
	store.Store
	full atomic.Bool
}

var errFull = &store.WriteError{Path: "/var/lib/hostgate/state.db", Kind: "full", Err: errors.New("database or disk is full (13)")}

func (s *fullStore) CheckWrite(ctx context.Context) error {
	if s.full.Load() {
		return errFull
	}
	return s.Store.CheckWrite(ctx)
}

func (s *fullStore) RecordSession(ctx context.Context, e store.Session) error {
	if s.full.Load() {
		return errFull
	}
	return s.Store.RecordSession(ctx, e)
}

// slowStore holds the audit entry of host "slow" until release is
// closed, and writes it after; entered is closed once it is held.
type slowStore struct {
	fullStore
	entered, release chan struct{}
}

func (s *slowStore) RecordSession(ctx context.Context, e store.Session) error {
	if e.HostID == "slow" {
		close(s.entered)
		<-s.release
		return s.Store.RecordSession(ctx, e)
	}
	return s.fullStore.RecordSession(ctx, e)
}

// TestAuditOutageEndsOnlyByALaterWrite: an entry whose write began
// before the disk filled and went through after another's failed does not
// end the outage (it did, and with --audit-required the next session got
// in and went unrecorded); one begun during the outage does, and so does
// /readyz's check write begun then.
func TestAuditOutageEndsOnlyByALaterWrite(t *testing.T) {
	ss := &slowStore{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnvWrapped(t, &Config{AuditRequired: true}, func(st store.Store) store.Store { ss.Store = st; return ss })
	s := e.srv
	// Let the held entry go however the test ends, before the server
	// closes (cleanups run last first), or its goroutine would outlive it.
	release := sync.OnceFunc(func() { close(ss.release) })
	t.Cleanup(release)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.recordAudit(e.ctx, store.Session{TokenName: "t", HostID: "slow", Kind: "ssh"})
	}()
	<-ss.entered
	ss.full.Store(true)
	s.recordAudit(e.ctx, store.Session{TokenName: "t", HostID: "h1", Kind: "ssh"})
	if s.auditLog.failure() == nil {
		t.Fatal("a failed entry began no outage")
	}
	release()
	<-done
	if s.auditLog.failure() == nil {
		t.Fatal("an entry begun before the outage ended it")
	}
	ss.full.Store(false)
	s.recordAudit(e.ctx, store.Session{TokenName: "t", HostID: "h2", Kind: "ssh"})
	if err := s.auditLog.failure(); err != nil {
		t.Fatalf("an entry written during the outage did not end it: %v", err)
	}
	// The same for /readyz's write: begun in an outage, it ends it.
	ss.full.Store(true)
	s.recordAudit(e.ctx, store.Session{TokenName: "t", HostID: "h3", Kind: "ssh"})
	ss.full.Store(false)
	s.ready.mu.Lock()
	s.ready.result = nil // no cached answer: probe checks again
	s.ready.mu.Unlock()
	_, _ = s.probe()
	if s.auditLog.failure() != nil {
		t.Fatalf("/readyz's write did not end the outage: %v", s.auditLog.failure())
	}
}

// logLine says whether a line of logs holds every one of parts.
func logLine(logs string, parts ...string) bool {
	for line := range strings.Lines(logs) {
		found := true
		for _, p := range parts {
			found = found && strings.Contains(line, p)
		}
		if found {
			return true
		}
	}
	return false
}

// dockerCheck adds a ready check "docker" that fails while the switch it
// returns is on.
func dockerCheck(e *env) *atomic.Bool {
	var down atomic.Bool
	e.srv.AddReadyCheck("docker", func(context.Context) error {
		if down.Load() {
			return errors.New("the Docker engine does not answer")
		}
		return nil
	})
	return &down
}

// getReadyz answers GET /readyz of the gateway at base.
func getReadyz(t *testing.T, base string) (int, readyAnswer) {
	t.Helper()
	var a readyAnswer
	res, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, a
}

type readyAnswer struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
	Error  struct{ Code, Message string }
}

// TestReadyzReportsEachDependency: /readyz answered ready while the state
// store refused every write (a full disk: reads still worked) and while
// the Docker engine was down, and a full disk showed only as one audit
// warning per session. It now names each dependency and what failed, the
// audit log's outage is logged once with the file, counted, and ends
// when the store takes a write again.
func TestReadyzReportsEachDependency(t *testing.T) {
	var fs *fullStore
	e := newEnvWrapped(t, nil, func(st store.Store) store.Store { fs = &fullStore{Store: st}; return fs })
	e.srv.ready.ttl = 0 // a probe per request, so the test need not wait out the cache
	var logs testenv.LogBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
	dockerDown := dockerCheck(e)
	ready := func() (int, readyAnswer) {
		t.Helper()
		return getReadyz(t, e.ts.URL)
	}
	if code, a := ready(); code != 200 || a.Status != "ready" || a.Checks["store"] != "ok" || a.Checks["audit"] != "ok" || a.Checks["docker"] != "ok" {
		t.Fatalf("healthy: %d %+v", code, a)
	}

	// The disk fills: sessions go on, unrecorded.
	_, k := newKey(t)
	if _, err := e.dialAgent(e.token(store.RoleAgent, "h1"), k, hostgate.Info{}); err != nil {
		t.Fatal(err)
	}
	admin := e.token(store.RoleAdmin)
	fs.full.Store(true)
	for range 3 {
		c, err := e.relay("h1", admin)
		if err != nil {
			t.Fatalf("a session while the audit log cannot be written: %v", err)
		}
		echoRoundTrip(t, c, 10)
	}
	if n := strings.Count(logs.String(), "audit log: the state database refused"); n != 1 {
		t.Errorf("3 unrecorded sessions logged %d times, want once per outage:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "/var/lib/hostgate/state.db") {
		t.Errorf("the audit failure's log does not name the database file:\n%s", logs.String())
	}
	m := e.metricsText()
	for _, want := range []string{"hostgate_audit_write_failures_total 3", "hostgate_audit_failing 1"} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	code, a := ready()
	if code != 503 || a.Status != "not_ready" || a.Error.Code != "not_ready" ||
		!strings.Contains(a.Checks["store"], "state database") || !strings.Contains(a.Checks["audit"], "audit log") || a.Checks["docker"] != "ok" ||
		!strings.Contains(a.Error.Message, "store: ") || !strings.Contains(a.Error.Message, "audit: ") {
		t.Errorf("disk full: %d %+v", code, a)
	}
	// The answer is unauthenticated: the paths and errors are in the log only.
	if raw := fmt.Sprintf("%+v", a); strings.Contains(raw, "/var/lib") || strings.Contains(raw, "disk is full") {
		t.Errorf("/readyz tells anyone the database's path or error: %s", raw)
	}
	for _, want := range [][2]string{{"check=store", "/var/lib/hostgate/state.db"}, {"check=audit", "3 sessions unrecorded"}} {
		if !logLine(logs.String(), "readyz: a check failed", want[0], want[1]) {
			t.Errorf("no log line of the failed check with %q:\n%s", want, logs.String())
		}
	}

	// Space comes back: the next probe ends the outage, without a session.
	fs.full.Store(false)
	dockerDown.Store(true)
	code, a = ready()
	if code != 503 || a.Checks["store"] != "ok" || a.Checks["audit"] != "ok" || a.Checks["docker"] != checkFailure("docker") ||
		!strings.Contains(a.Error.Message, "docker: failed") || !logLine(logs.String(), "check=docker", "the Docker engine does not answer") {
		t.Errorf("space back, Docker down: %d %+v", code, a)
	}
	if !strings.Contains(e.metricsText(), "hostgate_audit_failing 0") {
		t.Error("hostgate_audit_failing stays 1 after the store took a write")
	}
	if !bytes.Contains([]byte(logs.String()), []byte("unrecordedSessions=3")) {
		t.Errorf("the end of the outage is not logged with what it lost:\n%s", logs.String())
	}
	dockerDown.Store(false)
	if code, a := ready(); code != 200 || a.Status != "ready" {
		t.Errorf("all back: %d %+v", code, a)
	}
}

// TestAuditRequired: with AuditRequired, while the audit log cannot be
// written a new session and a certificate are refused with a 503 that
// says why, the session already open goes on, reads still answer, and
// sessions start again once the database takes writes.
func TestAuditRequired(t *testing.T) {
	var fs *fullStore
	stateDir := t.TempDir()
	e := newEnvWrapped(t, &Config{AuditRequired: true, StateDir: stateDir}, func(st store.Store) store.Store { fs = &fullStore{Store: st}; return fs })
	e.srv.ready.ttl = 0
	var logs testenv.LogBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
	_, k := newKey(t)
	if _, err := e.dialAgent(e.token(store.RoleAgent, "h1"), k, hostgate.Info{}); err != nil {
		t.Fatal(err)
	}
	admin := e.token(store.RoleAdmin)
	open, err := e.relay("h1", admin)
	if err != nil {
		t.Fatal(err)
	}
	// A relay's entry is written after the upgrade, before its bytes flow:
	// a round trip has it written. Without one, on a loaded machine the
	// disk filled first, this session found the outage, and the next was
	// refused.
	echoRoundTrip(t, open, 10)
	fs.full.Store(true)
	// The session whose entry fails first finds the outage; it goes on.
	first, err := e.relay("h1", admin)
	if err != nil {
		t.Fatalf("the session that finds the outage: %v", err)
	}
	echoRoundTrip(t, first, 10)

	_, err = e.relay("h1", admin)
	var he *bytestream.HandshakeError
	if !errors.As(err, &he) || he.StatusCode != http.StatusServiceUnavailable || !strings.Contains(he.Body, "audit_unavailable") ||
		!strings.Contains(he.Body, "disk of the state database") || !strings.Contains(he.Body, "--audit-required") {
		t.Fatalf("a session while the audit log cannot be written: %v", err)
	}
	if code, body := e.call("POST", "/v1/hosts/h1/certificates", admin, map[string]string{"publicKey": k}, nil); code != http.StatusServiceUnavailable || !strings.Contains(body, "audit_unavailable") {
		t.Errorf("a certificate while the audit log cannot be written: %d %s", code, body)
	}
	if code, _ := e.call("GET", "/v1/hosts", admin, nil, nil); code != http.StatusOK {
		t.Errorf("listing hosts while the audit log cannot be written: %d", code)
	}
	echoRoundTrip(t, open, 10) // the open session goes on
	// The answers do not name the file (they go out before
	// authentication); the outage's log line does, with the fix, and says
	// what is refused rather than that sessions go on unrecorded.
	var outage []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "audit log: the state database refused") {
			outage = append(outage, l)
		}
	}
	if len(outage) != 1 || !strings.Contains(outage[0], errFull.Path) || !strings.Contains(outage[0], "free space on the filesystem") ||
		!strings.Contains(outage[0], "--audit-required") || strings.Contains(outage[0], "go on unrecorded") || !strings.Contains(outage[0], "stateDir="+stateDir) {
		t.Errorf("the outage's log lines %q: want one naming %s, the fix, what --audit-required refuses and the state dir", outage, errFull.Path)
	}
	if strings.Contains(he.Body, errFull.Path) {
		t.Errorf("the 503, sent before authentication, names the file: %s", he.Body)
	}

	fs.full.Store(false)
	again, err := e.relay("h1", admin)
	if err != nil {
		t.Fatalf("a session once the database takes writes: %v", err)
	}
	echoRoundTrip(t, again, 10)
}

// TestReadyzWarnsOfLowSpace: before the state database's writes fail on
// a full disk, /readyz says "degraded" (still 200) with how much is free,
// hostgate_state_free_bytes shows it, and the gateway logs the dir once
// when its filesystem turns low and once when it recovers.
func TestReadyzWarnsOfLowSpace(t *testing.T) {
	e := newEnv(t, &Config{StateDir: "/var/lib/hostgate"})
	e.srv.ready.ttl = 0
	var logs testenv.LogBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
	var free atomic.Uint64
	free.Store(50 << 30)
	e.srv.ready.disk.stat = func(string) (uint64, uint64, error) { return free.Load(), 100 << 30, nil }
	ready := func() (int, readyAnswer) {
		t.Helper()
		var a readyAnswer
		code, _ := e.call("GET", "/readyz", "", nil, &a)
		return code, a
	}
	if code, a := ready(); code != 200 || a.Status != "ready" || a.Checks["disk"] != "ok" {
		t.Fatalf("50 GiB free: %d %+v", code, a)
	}
	free.Store(600 << 20) // under 1% of 100 GiB
	for range 2 {
		if code, a := ready(); code != 200 || a.Status != "degraded" || !strings.Contains(a.Checks["disk"], "600 MiB free, under 1024 MiB") {
			t.Fatalf("600 MiB free: %d %+v", code, a)
		}
	}
	if !strings.Contains(e.metricsText(), "hostgate_state_free_bytes 6.291456e+08") {
		t.Error("metrics lack hostgate_state_free_bytes 6.291456e+08")
	}
	if n := strings.Count(logs.String(), "low on space"); n != 1 || !logLine(logs.String(), "low on space", "dir=/var/lib/hostgate", "freeBytes=629145600") {
		t.Errorf("low space logged %d times, want once with the dir:\n%s", n, logs.String())
	}
	free.Store(2 << 30)
	if code, a := ready(); code != 200 || a.Status != "ready" || a.Checks["disk"] != "ok" {
		t.Fatalf("space back: %d %+v", code, a)
	}
	if !strings.Contains(logs.String(), "has space again") {
		t.Errorf("the recovery is not logged:\n%s", logs.String())
	}
}

// TestReadyzLogsAFailureOncePerOutage: a check that kept failing was logged
// at every probe, two lines per 5 s through a full disk for a load
// balancer's polling (found by the audit32 audit). It is logged when it
// begins, again only every readyRelog while it goes on, and once when it
// passes again.
func TestReadyzLogsAFailureOncePerOutage(t *testing.T) {
	e := newEnv(t, nil)
	e.srv.ready.ttl = 0
	var logs testenv.LogBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
	down := dockerCheck(e)
	get := func() int {
		t.Helper()
		code, _ := getReadyz(t, e.ts.URL)
		return code
	}
	down.Store(true)
	for range 5 {
		if code := get(); code != 503 {
			t.Fatalf("docker down: %d", code)
		}
	}
	if n := strings.Count(logs.String(), "readyz: a check failed"); n != 1 {
		t.Errorf("5 failed probes logged %d times, want once:\n%s", n, logs.String())
	}
	down.Store(false)
	for range 3 {
		if code := get(); code != 200 {
			t.Fatalf("docker back: %d", code)
		}
	}
	if n := strings.Count(logs.String(), "readyz: a check passes again"); n != 1 || !logLine(logs.String(), "passes again", "check=docker", "probes=5") {
		t.Errorf("the recovery is not logged once with the failed probes:\n%s", logs.String())
	}
	down.Store(true)
	get()
	if n := strings.Count(logs.String(), "readyz: a check failed"); n != 2 {
		t.Errorf("a second outage logged %d failures in all, want 2:\n%s", n, logs.String())
	}

	// An outage that goes on is logged again every readyRelog.
	r := &readiness{}
	var l2 testenv.LogBuffer
	lg := slog.New(slog.NewTextHandler(&l2, nil))
	fail := []checkResult{{"store", errors.New("disk full")}}
	t0 := time.Now()
	for i := range 130 { // 5 s apart: 10m45s
		r.logChecks(lg, fail, t0.Add(time.Duration(i)*5*time.Second))
	}
	if n := strings.Count(l2.String(), "readyz: a check failed"); n != 2 || !logLine(l2.String(), "check failed", "failingFor=10m0s", "probes=121") {
		t.Errorf("an outage of 10m45s logged %d times, want twice (the second with how long):\n%s", n, l2.String())
	}
}

// TestStateFreeBytesLeftOutWhileUnknown: while the state dir's free space
// cannot be measured (the check fails, or the system has no way to),
// hostgate_state_free_bytes is not in the scrape, where it said -1: an
// alert on low space fired with a value that was never the disk's. It is
// back once the check works.
func TestStateFreeBytesLeftOutWhileUnknown(t *testing.T) {
	e := newEnv(t, &Config{StateDir: "/var/lib/hostgate"})
	var statErr atomic.Pointer[error]
	e.srv.ready.disk.stat = func(string) (uint64, uint64, error) {
		if p := statErr.Load(); p != nil {
			return 0, 0, *p
		}
		return 50 << 30, 100 << 30, nil
	}
	for _, err := range []error{errors.New("statfs /var/lib/hostgate: input/output error"), errors.ErrUnsupported} {
		statErr.Store(&err)
		if got := e.metricsText(); strings.Contains(got, "hostgate_state_free_bytes") {
			t.Errorf("free space unknown (%v): the scrape has %q", err, metricLines(got, "hostgate_state_free_bytes"))
		}
	}
	statErr.Store(nil)
	if got := e.metricsText(); !strings.Contains(got, "hostgate_state_free_bytes 5.36870912e+10") {
		t.Errorf("free space known: the scrape has %q", metricLines(got, "hostgate_state_free_bytes"))
	}
}

// metricLines is text's lines that mention name.
func metricLines(text, name string) []string {
	var out []string
	for l := range strings.Lines(text) {
		if strings.Contains(l, name) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}
