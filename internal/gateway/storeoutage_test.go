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

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/testenv"
)

// hostsFailStore fails every listing of hosts with err while it is set.
type hostsFailStore struct {
	store.Store
	err atomic.Pointer[error]
}

func (s *hostsFailStore) Hosts(ctx context.Context) ([]store.Host, error) {
	if p := s.err.Load(); p != nil {
		return nil, *p
	}
	return s.Store.Hosts(ctx)
}

// TestStoreOutageLoggedOnce: while the state store fails the API's reads,
// each request is still 503 store_unavailable, but the outage is one ERROR
// line, again when the store's error changes, and one line when it
// answers again: every such request logged an ERROR before.
func TestStoreOutageLoggedOnce(t *testing.T) {
	var fs *hostsFailStore
	e := newEnvWrapped(t, nil, func(st store.Store) store.Store { fs = &hostsFailStore{Store: st}; return fs })
	var logs testenv.LogBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
	e.srv.storeReads.every = time.Hour // no reminder within the test, however slow
	admin := e.token(store.RoleAdmin)
	if code, _ := e.call("GET", "/v1/hosts", admin, nil, nil); code != http.StatusOK {
		t.Fatalf("before the outage: %d", code)
	}
	fail := func(err error) { fs.err.Store(&err) }
	fail(errors.New("store: hosts: disk I/O error"))
	for i := range 40 {
		if i == 30 {
			fail(errors.New("store: hosts: database is locked"))
		}
		if code, ec := e.call("GET", "/v1/hosts", admin, nil, nil); code != http.StatusServiceUnavailable || ec != "store_unavailable" {
			t.Fatalf("request %d during the outage: %d %s, want 503 store_unavailable", i, code, ec)
		}
	}
	got := logs.String()
	if n := strings.Count(got, "level=ERROR"); n != 2 || !strings.Contains(got, "disk I/O error") || !strings.Contains(got, "database is locked") {
		t.Errorf("40 requests failing with 2 errors logged %d ERROR lines, want 2 naming each error:\n%s", n, got)
	}
	fs.err.Store(nil)
	for range 2 {
		if code, _ := e.call("GET", "/v1/hosts", admin, nil, nil); code != http.StatusOK {
			t.Fatalf("after the outage: %d", code)
		}
	}
	if got := logs.String(); strings.Count(got, "level=INFO") != 1 || !strings.Contains(got, "failed=40") {
		t.Errorf("the outage's end is not logged once with its count:\n%s", got)
	}
}

// enrollFailStore fails every enrollment with errFull, as a full disk
// fails writes while reads go through.
type enrollFailStore struct {
	store.Store
	fail atomic.Bool
}

func (s *enrollFailStore) Enroll(ctx context.Context, e store.Enrollment) (store.Host, error) {
	if s.fail.Load() {
		return store.Host{}, errFull
	}
	return s.Store.Enroll(ctx, e)
}

// TestStoreWriteOutageLoggedOnce: an agent's connect reads its host's
// record, which goes through on a full disk, before its enrollment fails:
// the read must not end the outage of writes, or each connect would log
// it anew.
func TestStoreWriteOutageLoggedOnce(t *testing.T) {
	var fs *enrollFailStore
	e := newEnvWrapped(t, nil, func(st store.Store) store.Store { fs = &enrollFailStore{Store: st}; return fs })
	var logs testenv.LogBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
	_, k := newKey(t)
	agent := e.token(store.RoleAgent, "h")
	e.pin("h", k) // an enrollment, not a key to prove
	fs.fail.Store(true)
	for i := range 5 {
		a, err := e.dialAgent(agent, k, hostgate.Info{})
		if err == nil {
			a.close()
			t.Fatalf("connect %d enrolled with every write failing", i)
		}
		if !strings.Contains(err.Error(), "503") {
			t.Fatalf("connect %d: %v, want 503", i, err)
		}
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 {
		t.Errorf("5 connects failing to enroll logged %d ERROR lines, want 1:\n%s", n, logs.String())
	}
}
