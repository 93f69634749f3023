package gateway

import (
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hostgate/hostgate/internal/testenv"
)

// TestDiskStatFailureLoggedOnce: while the state dir's free space cannot
// be measured, /readyz's probes (a load balancer's, every 5 s) log it
// once, naming the dir and the error, not a WARN each; again when the
// error changes, and once when it can be measured again.
func TestDiskStatFailureLoggedOnce(t *testing.T) {
	e := newEnv(t, &Config{StateDir: "/var/lib/hostgate"})
	e.srv.ready.ttl = 0
	var logs testenv.LogBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
	var statErr atomic.Pointer[error]
	e.srv.ready.disk.stat = func(string) (uint64, uint64, error) {
		if p := statErr.Load(); p != nil {
			return 0, 0, *p
		}
		return 50 << 30, 100 << 30, nil
	}
	set := func(err error) { statErr.Store(&err) }
	probe := func() {
		t.Helper()
		if code, _ := e.call("GET", "/readyz", "", nil, nil); code != 200 {
			t.Fatalf("/readyz: %d", code)
		}
	}
	set(errors.New("statfs /var/lib/hostgate: input/output error"))
	for range 10 {
		probe()
	}
	set(errors.New("statfs /var/lib/hostgate: stale NFS file handle"))
	for range 10 {
		probe()
	}
	got := logs.String()
	if n := strings.Count(got, "level=WARN"); n != 2 || !strings.Contains(got, "input/output error") || !strings.Contains(got, "stale NFS") || !strings.Contains(got, "dir=/var/lib/hostgate") {
		t.Errorf("20 probes failing to measure with 2 errors logged %d WARN lines, want 2 naming the dir and each error:\n%s", n, got)
	}
	statErr.Store(nil)
	probe()
	probe()
	if got := logs.String(); strings.Count(got, "level=INFO") != 1 || !strings.Contains(got, "failed=20") {
		t.Errorf("the outage's end is not logged once with its count:\n%s", got)
	}
}
