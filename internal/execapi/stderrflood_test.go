package execapi

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// Sandbox code may take over its agent (the brief's threat model: it runs
// as the agent's user in the agent's container) and write to the agent's
// stderr without end. Every write was an Info line in the gateway's log,
// so one sandbox could fill the gateway's disk (journald) at the speed of
// docker exec's stream. The lines logged are bounded per minute, the rest
// are counted and said once, and the last line is still kept for the
// errors that quote it.
func TestAgentStderrFloodBounded(t *testing.T) {
	var logs bytes.Buffer
	w := &logWriter{log: slog.New(slog.NewTextHandler(&logs, nil))}
	const writes = 10000
	for range writes {
		if _, err := w.Write([]byte("flood line\n")); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = w.Write([]byte("the last words\n"))
	lines := strings.Count(logs.String(), "\n")
	if lines > maxStderrLines+1 {
		t.Fatalf("%d stderr writes made %d log lines, want at most %d (the bound) and one saying the rest are dropped", writes+1, lines, maxStderrLines+1)
	}
	if !strings.Contains(logs.String(), "dropped") {
		t.Fatalf("the log does not say lines were dropped:\n%s", logs.String())
	}
	if got := w.last(); got != "the last words" {
		t.Fatalf("last() = %q, want the last line written, %q", got, "the last words")
	}
}
