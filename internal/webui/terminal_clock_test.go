package webui

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/testenv"
)

// The terminal page goes on resuming its kept terminal while the wall
// clock steps (NTP setting it as a laptop wakes, just when a dropped
// network is resumed). testdata/terminal_clock.js runs static/terminal.js
// in node, the browser stubbed and its clocks virtual, through each
// scenario:
//
//   - seq: each connect's seq is above the last, in the page and across a
//     reload. The gateway closes an attempt whose seq is below the socket
//     it holds STALE, and the page then says the terminal is open in
//     another page and gives it up: with the wall clock set back, the
//     page's next attempt lost to its own dead socket.
//   - lost: set forward while it reconnects, the page goes on for keepMs
//     from the drop; it gave up at once ("the gateway kept the terminal no
//     longer"), dropping a terminal the gateway kept.
//   - beat: set back, a connection that dies without a close is still
//     found out in 20 s: no ping was asked for the hour the clock was set
//     back by, and keystrokes went nowhere meanwhile.
func TestTerminalOutlivesClockSteps(t *testing.T) {
	node, err := exec.LookPath("node")
	testenv.RequirePeer(t, "node (scripts/env.sh installs it for the browser tests)", err == nil)
	for _, scenario := range []string{"seq", "lost", "beat"} {
		t.Run(scenario, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, node, "testdata/terminal_clock.js", "static/terminal.js", scenario).CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
		})
	}
}
