package gateway

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/hostgate/hostgate/internal/testenv"
)

// yamuxFrame is a yamux frame header (spec.md): version 0, type, flags,
// stream id, length.
func yamuxFrame(typ uint8, flags uint16, id, length uint32) []byte {
	h := make([]byte, 12)
	h[1] = typ
	binary.BigEndian.PutUint16(h[2:4], flags)
	binary.BigEndian.PutUint32(h[4:8], id)
	binary.BigEndian.PutUint32(h[8:12], length)
	return h
}

// An agent that opens streams (agents open none; its tunnel takes one)
// and floods window updates that grant nothing is bounded, as before (the
// streams refused, the tunnel closed), and now heard of: each kind logged
// once for its tunnel, naming the host and the limit, and every frame
// counted.
func TestAgentMisuseLoggedOnce(t *testing.T) {
	e := newEnv(t, nil)
	var logs testenv.LogBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
	ws := e.pinnedAgentWS("rogue")
	done := e.srv.Tunnels().Done("rogue")
	const (
		typeWindowUpdate = 1
		flagSYN          = 1
		streams          = 5
		updates          = 5000 // past bytestream's 4096
	)
	var msg []byte
	for i := range streams {
		msg = append(msg, yamuxFrame(typeWindowUpdate, flagSYN, uint32(2+2*i), 0)...)
	}
	for range updates {
		msg = append(msg, yamuxFrame(typeWindowUpdate, 0, 2, 0)...)
	}
	if err := ws.Write(e.ctx, websocket.MessageBinary, msg); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, done, "the flooding agent's tunnel")
	out := logs.String()
	for _, want := range []string{"agent opened more streams than its tunnel allows", "agent sends window updates that grant nothing"} {
		if n := strings.Count(out, want); n != 1 {
			t.Errorf("%q logged %d times, want once:\n%s", want, n, out)
		}
	}
	if !strings.Contains(out, "host=rogue") || !strings.Contains(out, "limit=1") {
		t.Errorf("the log does not name the host and the limit:\n%s", out)
	}
	if !strings.Contains(out, "flooded the session with window updates") {
		t.Errorf("the tunnel's end does not say why:\n%s", out)
	}
	m := e.metricsText()
	for _, want := range []string{
		fmt.Sprintf(`hostgate_agent_misuse_total{kind="stream_refused"} %d`, streams-1),
		`hostgate_agent_misuse_total{kind="empty_window_update"} 4097`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
