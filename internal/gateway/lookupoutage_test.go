package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/testenv"
)

// lookupFailStore fails every token lookup with err while it is set.
type lookupFailStore struct {
	store.Store
	err atomic.Pointer[error]
}

func (s *lookupFailStore) LookupToken(ctx context.Context, secret string) (store.Token, error) {
	if p := s.err.Load(); p != nil {
		return store.Token{}, *p
	}
	return s.Store.LookupToken(ctx, secret)
}

func (s *lookupFailStore) fail(err error) {
	if err == nil {
		s.err.Store(nil)
		return
	}
	s.err.Store(&err)
}

// TestTokenLookupOutageLoggedOnce: while the state store fails reads,
// requests with well-formed tokens nobody holds (anyone on the network can
// send them) still get 503 store_unavailable, but the outage is one ERROR
// line, again when the store's error changes, and one line when lookups
// work again: every such request logged an ERROR before, so a store
// outage let anyone flood the log.
func TestTokenLookupOutageLoggedOnce(t *testing.T) {
	var fs *lookupFailStore
	e := newEnvWrapped(t, nil, func(st store.Store) store.Store { fs = &lookupFailStore{Store: st}; return fs })
	var logs testenv.LogBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
	e.srv.lookupFailures.every = time.Hour // no reminder within the test, however slow
	admin := e.token(store.RoleAdmin)
	garbage := func() string { return e.token(store.RoleClient, "x") } // well-formed, fresh: never cached

	secrets := make([]string, 40)
	for i := range secrets {
		secrets[i] = garbage()
	}
	fs.fail(errors.New("store: lookup token: disk I/O error"))
	for i, sec := range secrets {
		if i == 30 {
			fs.fail(errors.New("store: lookup token: database is locked"))
		}
		if code, ec := e.call("GET", "/v1/hosts", sec, nil, nil); code != http.StatusServiceUnavailable || ec != "store_unavailable" {
			t.Fatalf("request %d during the outage: %d %s, want 503 store_unavailable", i, code, ec)
		}
	}
	got := logs.String()
	if n := strings.Count(got, "level=ERROR"); n != 2 {
		t.Errorf("40 lookups failing with 2 errors logged %d ERROR lines, want 2 (one per error):\n%s", n, got)
	}
	for _, want := range []string{"disk I/O error", "database is locked"} {
		if !strings.Contains(got, want) {
			t.Errorf("the log does not name the store's error %q:\n%s", want, got)
		}
	}
	fs.fail(nil)
	if code, _ := e.call("GET", "/v1/hosts", admin, nil, nil); code != http.StatusOK {
		t.Fatalf("after the outage: %d", code)
	}
	if got := logs.String(); !strings.Contains(got, "level=INFO") || !strings.Contains(got, "failed=40") {
		t.Errorf("the outage's end is not logged with its count:\n%s", got)
	}
}

// TestLookupFailuresReminder: an outage that goes on is logged again once
// every interval, saying how many lookups failed since.
func TestLookupFailuresReminder(t *testing.T) {
	var logs testenv.LogBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	l := lookupFailures(time.Minute)
	t0 := time.Unix(1e9, 0)
	err := errors.New("disk I/O error")
	for i := range 10 {
		l.failed(logger, err, t0.Add(time.Duration(i)*time.Second))
	}
	l.failed(logger, err, t0.Add(61*time.Second))
	got := logs.String()
	if n := strings.Count(got, "level=ERROR"); n != 2 {
		t.Errorf("%d ERROR lines, want 2 (the first, the reminder):\n%s", n, got)
	}
	if !strings.Contains(got, "failed=11") {
		t.Errorf("the reminder does not count the outage's failures:\n%s", got)
	}
}
