package execapi

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConnectCutByTheExecutionsEndWarnsNothing: an execution terminated
// while the gateway was still connecting to its new agent (reading the
// container's environment) cut that connection, and the gateway warned
// "gateway connection to the agent failed; commands use docker exec until
// one succeeds" for an execution that had no commands left to run. A
// soak that provisioned, checkpointed, restored and terminated sandboxes
// logged it after 4 of its first 8 restores, each terminated at once. The
// execution's end is logged on its own ("execution ended; agent tunnel
// closed"); the connection's failure is no news then.
func TestConnectCutByTheExecutionsEndWarnsNothing(t *testing.T) {
	f := newFixture(t)
	var logs syncBuffer
	f.agents.log = slog.New(slog.NewTextHandler(&logs, nil))
	// A FIFO holds the connection's read of the environment until the
	// test has ended the execution under it.
	fifo := filepath.Join(t.TempDir(), "environ")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	f.agents.environPaths = []string{fifo}
	id := provisioned(t, f)

	// The agent has the FIFO open for reading once a non-blocking open
	// for writing finds a reader.
	deadline := time.Now().Add(wait)
	var w *os.File
	for {
		var err error
		w, err = os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.ENXIO) || time.Now().After(deadline) {
			t.Fatalf("the gateway's connection never read the environment: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Terminated: the execution is gone and its container, the agent's
	// stdio with it, ends under the pending read.
	f.ex.end(id)
	f.pool.killAgent(id)
	const ended = "execution ended; agent tunnel closed"
	for !strings.Contains(logs.String(), ended) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q logged:\n%s", ended, logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = w.Close() // EOF: the agent's read returns
	// The loop logs the end once the connecting goroutine has returned
	// (clearTunnel waits for it), so a warning would be in by now.
	if s := logs.String(); strings.Contains(s, "level=WARN") {
		t.Errorf("an execution's end under the gateway's connection to its agent was warned of:\n%s", s)
	}
}
