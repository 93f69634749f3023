package hostgate_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
)

// recordingTransport records the argv of each spawn and says whether it
// owns supervision, as the SSH client to a hostgate server does.
type recordingTransport struct {
	owns bool
	mu   sync.Mutex
	argv [][]string
}

func (r *recordingTransport) Spawn(ctx context.Context, argv []string, opts hostgate.SpawnOptions) (hostgate.Process, error) {
	r.mu.Lock()
	r.argv = append(r.argv, slices.Clone(argv))
	r.mu.Unlock()
	return doneProcess{}, nil
}

func (r *recordingTransport) OwnsSupervision() bool { return r.owns }

// TestPersistentWatchdogUnlessTransportSupervises is the seed's "when
// info.persistent is true, spawn starts the process under the watchdog
// unless its transport already owns supervision": a persistent host runs
// argv under the watchdog's shell where the transport does not supervise,
// and as it is where it does, also through Wrap; a host that is not
// persistent never adds the watchdog. The watchdog's own tests run it on a
// transport without supervision only.
func TestPersistentWatchdogUnlessTransportSupervises(t *testing.T) {
	argv := []string{"sleep", "5"}
	for _, c := range []struct {
		persistent, owns, wrapped bool
		watched                   bool
	}{
		{persistent: true, owns: false, watched: true},
		{persistent: true, owns: true, watched: false},
		{persistent: true, owns: false, wrapped: true, watched: true},
		{persistent: true, owns: true, wrapped: true, watched: false},
		{persistent: false, owns: false, watched: false},
	} {
		tr := &recordingTransport{owns: c.owns}
		h := hostgate.New(hostgate.Info{Persistent: c.persistent}, func(context.Context) (*hostgate.Connection, error) {
			return &hostgate.Connection{Transport: tr, Close: func() error { return nil }}, nil
		})
		use := h
		if c.wrapped {
			use = hostgate.Wrap(h, func(a []string, _ string, e map[string]string) ([]string, map[string]string) { return a, e })
		}
		p, err := use.Spawn(t.Context(), argv, hostgate.SpawnOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Wait()
		_ = use.Close()
		_ = h.Close()
		if len(tr.argv) != 1 {
			t.Fatalf("%+v: %d spawns, want 1", c, len(tr.argv))
		}
		got := tr.argv[0]
		as := slices.Equal(got, argv)
		under := len(got) > len(argv) && got[0] == "sh" && slices.Equal(got[len(got)-len(argv):], argv)
		if c.watched && !under || !c.watched && !as {
			t.Errorf("persistent %v, transport supervises %v, wrapped %v: spawned %d words, %q … %q; want it under the watchdog %v", c.persistent, c.owns, c.wrapped, len(got), got[0], got[max(0, len(got)-len(argv)):], c.watched)
		}
	}
}

// unansweredTransport is a host that never answers a spawn (a session's
// open): Spawn returns only when its ctx ends, or when the test gives up.
type unansweredTransport struct{ giveUp chan struct{} }

func (u unansweredTransport) Spawn(ctx context.Context, argv []string, opts hostgate.SpawnOptions) (hostgate.Process, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-u.giveUp:
		return nil, errors.New("the test gave up")
	}
}

// TestPersistentSpawnEndsWithCtx: Exec on a persistent host whose
// transport does not supervise returns ctx's error when ctx ends while
// the host has not answered the spawn, as on any other host. The
// watchdog's spawn ran under a ctx of its own that ctx's end did not
// reach (so that the transport's kill would not race the watchdog's), and
// waited for the host's answer, a minute on for a host that stopped
// answering.
func TestPersistentSpawnEndsWithCtx(t *testing.T) {
	tr := unansweredTransport{giveUp: make(chan struct{})}
	h := hostgate.New(hostgate.Info{Persistent: true}, func(context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{Transport: tr, Close: func() error { return nil }}, nil
	})
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute): // a guard against a hang, not a timing
		close(tr.giveUp)
		err = <-done
		t.Fatalf("Exec still in its spawn a minute after its ctx ended (then: %v)", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Exec whose ctx ended in the spawn: %v, want ctx's error", err)
	}
}
