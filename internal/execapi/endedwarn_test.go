package execapi

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
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
	// The connection's read of the environment waits until the execution
	// has ended and its agent's connection with it, then reads over the
	// dead connection, as a read in flight at the end fails. (A FIFO held
	// the open but not the read: a pread of one fails at once, ESPIPE,
	// which raced the end.)
	reached := make(chan struct{})
	var once sync.Once
	f.agents.readEnviron = func(c *ssh.Client, paths []string, forged forgedCopy) ([]string, error) {
		once.Do(func() { close(reached) })
		_ = c.Wait()
		return readEnviron(c, paths, forged)
	}
	id := provisioned(t, f)
	select {
	case <-reached:
	case <-time.After(wait):
		t.Fatalf("the gateway's connection never read the environment:\n%s", logs.String())
	}
	// Terminated: the execution is gone and its container, the agent's
	// stdio with it, ends under the pending read.
	f.ex.end(id)
	f.pool.killAgent(id)
	// The loop logs the end once the connecting goroutine has returned
	// (clearTunnel waits for it), so a warning would be in by then.
	const ended = "execution ended; agent tunnel closed"
	deadline := time.Now().Add(wait)
	for !strings.Contains(logs.String(), ended) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q logged:\n%s", ended, logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if s := logs.String(); strings.Contains(s, "level=WARN") {
		t.Errorf("an execution's end under the gateway's connection to its agent was warned of:\n%s", s)
	}
}
