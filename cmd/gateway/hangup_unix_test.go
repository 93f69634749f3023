//go:build unix

package main

import (
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
)

// lineWriter hands each log line to a channel.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	select {
	case w <- string(p):
	default:
	}
	return len(p), nil
}

// TestServeLogsAndIgnoresHangup: SIGHUP killed `gateway serve` without
// its drain (Go's default for a signal nobody asked for), cutting every
// session on a `kill -HUP` or a systemd unit's ExecReload. serve logs it
// and goes on. Without ignoreHangups the signal kills this test binary.
func TestServeLogsAndIgnoresHangup(t *testing.T) {
	ctx := testCtx(t)
	lines := make(lineWriter, 4)
	stop := ignoreHangups(ctx, slog.New(slog.NewTextHandler(lines, nil)))
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-lines:
		if !strings.Contains(l, "SIGHUP ignored") || !strings.Contains(l, "SIGTERM") {
			t.Errorf("log %q, want it to say SIGHUP is ignored and what stops the gateway", l)
		}
	case <-ctx.Done():
		t.Fatal("no log of the SIGHUP")
	}
}
