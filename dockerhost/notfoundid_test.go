package dockerhost

import (
	"strings"
	"testing"
	"time"
)

// An execution id a request names that no execution has is quoted in the
// not_found answer cut short: the id comes from the URL, at any length,
// and an answer echoing 5 KB of it (or a log line of it) helps no one.
func TestNotFoundQuotesIDCut(t *testing.T) {
	ctx := testCtx(t, time.Minute)
	h := fakeHost(t, &fakeDocker{}, time.Now())
	id := strings.Repeat("x", 5000)
	_, err := h.Get(ctx, id)
	if ErrorCode(err) != CodeNotFound {
		t.Fatalf("get of an unknown id: %v, want not_found", err)
	}
	if msg := err.Error(); len(msg) > 300 || !strings.Contains(msg, "xxxx…") {
		t.Errorf("not_found answer of %d bytes, want the id cut short with …: %.120q", len(msg), msg)
	}
}
