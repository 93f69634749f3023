package agent

import (
	"context"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/proxyproto"
	"github.com/hostgate/hostgate/internal/yamux"
)

// keysAgent is `agent serve --stdio --mux --keys-stdin` handed keys, as
// the gateway starts one in a sandbox: the gateway's end of its tunnel,
// whether the agent acked caller preambles, its log, and end, which closes
// the tunnel and checks that the agent returned cleanly.
func keysAgent(t *testing.T, keys StdioKeys) (sess *yamux.Session, acked bool, logs *serveLogBuffer, end func()) {
	t.Helper()
	gwSide, agentSide := serveTCPPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), serveWait)
	t.Cleanup(cancel)
	logs = new(serveLogBuffer)
	done := make(chan error, 1)
	go func() {
		done <- RunServe(ctx, []string{"--stdio", "--mux", "--keys-stdin"}, &ServeIO{Conn: agentSide, Stderr: logs})
	}()
	if err := WriteStdioKeys(gwSide, keys); err != nil {
		t.Fatal(err)
	}
	conn, ack := ReadCallerAck(gwSide)
	sess, err := bytestream.MuxClient(conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The agent's ack, if any, comes before the ping's answer.
	if _, err := sess.Ping(); err != nil {
		t.Fatal(err)
	}
	return sess, ack(), logs, func() {
		t.Helper()
		_ = sess.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("RunServe: %v\n%s", err, logs.String())
			}
		case <-time.After(serveWait):
			t.Fatal("RunServe did not return after the tunnel closed")
		}
	}
}

// TestRunServeKeysStdinCallers: a sandbox's agent whose keys offer caller
// preambles answers CallerPreambleAck before the multiplexer, reads a
// preamble on every stream (the caller in SSH_CONNECTION; the gateway's
// own connection's UNKNOWN), and closes a stream whose first bytes are no
// PROXY line, logging why, while the tunnel serves on.
func TestRunServeKeysStdinCallers(t *testing.T) {
	fx := newStdioKeysFixture(t)
	fx.keys.CallerPreamble = wire.CallerPreambleProxyV1
	sess, acked, logs, end := keysAgent(t, fx.keys)
	if !acked {
		t.Fatal("the agent did not answer the offer of caller preambles")
	}
	caller := proxyproto.Header{Src: netip.MustParseAddrPort("198.51.100.9:777")}
	// The tunnel here is a TCP pair, whose addresses an UNKNOWN leaves
	// (a sandbox's stdio has none: UNKNOWN 65535 there).
	own := sess.LocalAddr().(*net.TCPAddr)
	for h, want := range map[proxyproto.Header]string{caller: "198.51.100.9 777 ", {}: own.IP.String() + " " + strconv.Itoa(own.Port) + " "} {
		st, err := gateway.OpenCallerStream(t.Context(), sess, h)
		if err != nil {
			t.Fatal(err)
		}
		if out := serveSSHExec(t, st, fx.hostPub, certSigner(t, fx.ca, "exec-1"), `echo "$SSH_CONNECTION"`); !strings.HasPrefix(out, want) {
			t.Errorf("caller %v: SSH_CONNECTION %q, want it to start %q", h, out, want)
		}
	}
	// No PROXY line: closed at its first byte, and said why.
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write([]byte("SSH-2.0-Go\r\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(st); len(b) != 0 || err != nil {
		t.Errorf("a stream without a PROXY line read %q, %v; want it closed unanswered", b, err)
	}
	// Logged just after the close: looked for up to serveWait.
	for deadline := time.Now().Add(serveWait); !strings.Contains(logs.String(), "caller preamble is not a PROXY line"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent's log does not say why it closed the stream:\n%s", logs.String())
		}
	}
	st2, err := gateway.OpenCallerStream(t.Context(), sess, caller)
	if err != nil {
		t.Fatal(err)
	}
	if out := serveSSHExec(t, st2, fx.hostPub, certSigner(t, fx.ca, "exec-1"), "echo ok"); out != "ok\n" {
		t.Errorf("after a bad stream: %q", out)
	}
	end()
}

// TestRunServeKeysStdinNoAck: keys that do not offer caller preambles (an
// older gateway's) get no ack, and the gateway's ack reader passes the
// multiplexer's bytes on untouched: what it sees of an older agent too,
// which ignores the offer.
func TestRunServeKeysStdinNoAck(t *testing.T) {
	fx := newStdioKeysFixture(t)
	sess, acked, _, end := keysAgent(t, fx.keys)
	if acked {
		t.Fatal("acked without an offer")
	}
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if out := serveSSHExec(t, st, fx.hostPub, certSigner(t, fx.ca, "exec-1"), "echo ok"); out != "ok\n" {
		t.Errorf("got %q", out)
	}
	end()
}
