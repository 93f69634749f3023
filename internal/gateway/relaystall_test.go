package gateway

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/testenv"
)

// TestRelayToCallerThatStopsReadingEnds: a caller whose path stalls with
// its socket open (it reads nothing more) while its host floods it: the
// relay's write to it blocks once the sockets' buffers are full, and the
// relay ends at relayWriteTimeout rather than never. The relay waited on
// that write forever, and with it the host's stream, which nobody read
// any more: the host's own end of the session (its SSH keepalive giving
// up) never reached the gateway, and the e2e test
// TestNetworkFaults/ClientPathStallsMidFlood failed when the flood outran
// the buffers (found by helper stress48). The host's tunnel stays up.
func TestRelayToCallerThatStopsReadingEnds(t *testing.T) {
	saved := relayWriteTimeout
	relayWriteTimeout = 500 * time.Millisecond
	t.Cleanup(func() { relayWriteTimeout = saved })
	e := newEnv(t, nil)
	var logs testenv.LogBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
	admin := e.token(store.RoleAdmin)
	agent := e.dialRawAgent("h", &bytestream.MuxConfig{MaxStreams: -1})
	chunk := make([]byte, 1<<20)
	go func() {
		st, err := agent.AcceptStream()
		if err != nil {
			return
		}
		defer st.Close()
		for { // a flood, until the gateway ends the stream
			if _, err := st.Write(chunk); err != nil {
				return
			}
		}
	}()
	gw := e.tunnelSession("h")
	c, err := e.relay("h", admin)
	if err != nil {
		t.Fatal(err)
	}
	// The caller reads one byte, so the flood is known to run, and then
	// nothing: its socket stays open.
	if _, err := c.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); !strings.Contains(logs.String(), `msg="relay end"`); { // a guard against a hang, not a timing
		if time.Now().After(deadline) {
			t.Fatalf("the relay to a caller that stopped reading still runs a minute on (%s); logs:\n%s",
				metricLine(e.metricsText(), "hostgate_streams_open "), logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "the caller read nothing for 500ms") {
		t.Errorf("relay end does not say the caller stopped reading:\n%s", logs.String())
	}
	if gw.IsClosed() {
		t.Error("the host's tunnel closed with the relay")
	}
}
