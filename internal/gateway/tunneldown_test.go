package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/metrics"
)

// dialAgentTCP is dialAgent whose agent's TCP conn the test holds, to
// end it as a killed agent's or a dropped network's ends: without a
// close frame.
func (e *env) dialAgentTCP(token, hostKey string) (*fakeAgent, *net.TCPConn) {
	e.t.Helper()
	tcp := make(chan *net.TCPConn, 1)
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			tcp <- c.(*net.TCPConn)
		}
		return c, err
	}}
	e.t.Cleanup(tr.CloseIdleConnections)
	a, err := e.dialAgentOpts(token, hostKey, &bytestream.WebSocketOptions{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		e.t.Fatal(err)
	}
	return a, <-tcp
}

// waitLogLine waits for the first line of logs whose message is msg and
// returns it.
func waitLogLine(t *testing.T, logs *testenv.LogBuffer, msg string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^.*msg=` + regexp.QuoteMeta(strconv.Quote(msg)) + `.*$`)
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if l := re.FindString(logs.String()); l != "" {
			return l
		}
		if time.Now().After(end) {
			t.Fatalf("no %q line within 30 s:\n%s", msg, logs.String())
		}
	}
}

// TestTunnelDownSaysWhy: the gateway's "tunnel down" line says in words
// how the tunnel ended (its reason), and keeps the error it ended with
// (err) for debugging. It logged the error alone: coder/websocket's
// "failed to get reader: failed to read frame header: EOF" for a killed
// agent, "EOF" for one that stopped, and the agent's echo of the
// gateway's own close frame as "websocket closed by the peer: … the
// gateway is shutting down" (found by the tunnellogs32 audit).
func TestTunnelDownSaysWhy(t *testing.T) {
	const noClose = "the agent's connection ended without a close (agent killed, a proxy in between, the network)"
	for _, tc := range []struct {
		name      string
		end       func(e *env, a *fakeAgent, tcp *net.TCPConn)
		reason    string
		errPrefix string // of err's value, as the text handler quotes it; "": not checked
		cause     string // hostgate_tunnel_disconnects_total's label
	}{
		{"killed", func(_ *env, _ *fakeAgent, tcp *net.TCPConn) { _ = tcp.Close() }, noClose, `"failed to get reader: failed to read frame header: EOF"`, metrics.DisconnectConnectionLost},
		{"reset", func(_ *env, _ *fakeAgent, tcp *net.TCPConn) { _ = tcp.SetLinger(0); _ = tcp.Close() }, noClose, `"failed to get reader: failed to read frame header: `, metrics.DisconnectConnectionLost}, // EOF or a reset, as the RST comes
		{"stopped", func(_ *env, a *fakeAgent, _ *net.TCPConn) {
			_ = bytestream.CloseWithReason(a.conn, bytestream.StatusGoingAway, wire.AgentStopping)
			a.close()
		}, "the agent stopped", `"bytestream: websocket closed by the peer: agent stopping (status 1001)"`, metrics.DisconnectAgentStopped},
		{"closed plainly", func(_ *env, a *fakeAgent, _ *net.TCPConn) { a.close() }, "the agent closed the tunnel", `"bytestream: websocket closed by the peer with status 1000"`, metrics.DisconnectAgentClosed},
		{"agent refuses", func(_ *env, a *fakeAgent, _ *net.TCPConn) { a.refuse("agent refuses this gateway: its CA differs") },
			"the agent closed the tunnel: agent refuses this gateway: its CA differs", `"bytestream: websocket closed by the peer: agent refuses`, metrics.DisconnectAgentClosed},
		{"gateway stops", func(e *env, _ *fakeAgent, _ *net.TCPConn) { _ = e.srv.Close() },
			// err: the agent's echo of the gateway's close frame, or
			// yamux's "session shutdown" when the gateway's own close of
			// the session comes first (seen under load).
			"closed by this gateway: the gateway is shutting down", "", metrics.DisconnectGatewayStopping},
		{"replaced", func(e *env, a *fakeAgent, _ *net.TCPConn) {
			if _, err := e.dialAgent(e.token(store.RoleAgent, "h"), a.resp.Request.Header.Get(wire.HeaderHostKey), hostgate.Info{}); err != nil {
				e.t.Fatal(err)
			}
		}, "closed by this gateway: replaced by a newer connection for this host from 127.0.0.1", "", metrics.DisconnectReplaced}, // err: ours, or the agent's echo
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			var logs testenv.LogBuffer
			e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
			_, key := newKey(t)
			e.pin("h", key)
			a, tcp := e.dialAgentTCP(e.token(store.RoleAgent, "h"), key)
			// Up first: a tunnel replaced or closed before is not
			// logged at all.
			waitLogLine(t, &logs, "tunnel up")
			tc.end(e, a, tcp)
			line := waitLogLine(t, &logs, "tunnel down")
			want := "reason=" + strconv.Quote(tc.reason) + " err="
			if tc.errPrefix != "" {
				want += tc.errPrefix
			}
			if !strings.Contains(line, want) {
				t.Errorf("tunnel down line:\n%s\nwant it to hold\n%s", line, want)
			}
			// Counted before the line is logged.
			if m, want := e.metricsText(), `hostgate_tunnel_disconnects_total{cause="`+tc.cause+`"} 1`; !strings.Contains(m, want) {
				t.Errorf("/metrics lacks %s:\n%s", want, grepLines(m, "hostgate_tunnel_disconnects_total"))
			}
		})
	}
	t.Run("silent", func(t *testing.T) {
		// An agent that answers nothing (frozen: SIGSTOP, a proxy
		// holding its connection) ends by the gateway's keepalive.
		mc := DefaultTunnelMux()
		mc.KeepAliveInterval, mc.WriteTimeout = 50*time.Millisecond, 200*time.Millisecond
		e := newEnv(t, &Config{TunnelMux: mc})
		var logs testenv.LogBuffer
		e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
		_ = e.pinnedAgentWS("h") // never read
		line := waitLogLine(t, &logs, "tunnel down")
		if want := `reason="closed by this gateway: the agent stopped answering (agent frozen or overloaded, a proxy in between, the network)" err="bytestream: mux keepalive timed out"`; !strings.Contains(line, want) {
			t.Errorf("tunnel down line:\n%s\nwant it to hold\n%s", line, want)
		}
		if m, want := e.metricsText(), `hostgate_tunnel_disconnects_total{cause="unresponsive"} 1`; !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(m, "hostgate_tunnel_disconnects_total"))
		}
	})
	t.Run("silent, with a caller", func(t *testing.T) {
		// The caller relayed to the silent agent hears what the log
		// says: it stopped answering. It heard "its agent disconnected
		// from the gateway", which reads as an agent that stopped.
		mc := DefaultTunnelMux()
		mc.KeepAliveInterval, mc.WriteTimeout = 50*time.Millisecond, 200*time.Millisecond
		e := newEnv(t, &Config{TunnelMux: mc})
		_ = e.pinnedAgentWS("h") // never read
		c, err := e.relay("h", e.token(store.RoleAdmin))
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadFull(c, make([]byte, 1))
		var ce *bytestream.CloseError
		if want := "host h: its agent stopped answering (the network, or the agent frozen); connect again once it is back"; !errors.As(err, &ce) || ce.Reason != want {
			t.Errorf("the caller read %v, want %q", err, want)
		}
	})
}
