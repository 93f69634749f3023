package dockerhost

import (
	"testing"
	"time"
)

// TestOutputLimitIsCombined is the seed's "combined stdout/stderr byte
// limit": neither stream alone reaches maxOutputBytes, both together pass
// it, and that is an output overflow, which destroys the container.
// testLimitOutput's flood writes stdout alone, which a limit per stream
// would stop too.
func TestOutputLimitIsCombined(t *testing.T) {
	cli, img := engine(t)
	h := newTestHost(t, cli, nil)
	r := small()
	r.MaxOutputBytes = 64 << 10
	ex := provision(t, h, emptyReq(img, r))
	_, err := h.Exec(testCtx(t, time.Minute), ex.ExecutionID, ExecRequest{
		Command:   "/bin/sh",
		Args:      []string{"-c", "head -c 40000 /dev/zero; head -c 40000 /dev/zero >&2"},
		TimeoutMs: 60_000,
	})
	if ErrorCode(err) != CodeOutputLimit {
		t.Fatalf("40,000 bytes on each stream under a limit of 65,536: %v, want %s", err, CodeOutputLimit)
	}
	// The engine copies the container's two pipes concurrently, so the
	// order the streams reach the limit in is not the order the shell
	// wrote them: stderr may pass stdout's tail. What is fixed is that
	// the kept bytes sum to the limit and that neither stream alone
	// could have reached it.
	got := errOutput(t, err)
	if n := len(got[0]) + len(got[1]); n != 64<<10 || len(got[0]) > 40000 || len(got[1]) > 40000 {
		t.Errorf("kept %d bytes of stdout and %d of stderr, want 65,536 together and at most 40,000 of each", len(got[0]), len(got[1]))
	}
	waitRemoved(t, cli, ex.ContainerID, time.Minute)
}
