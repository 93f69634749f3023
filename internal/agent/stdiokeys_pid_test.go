package agent

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway/wire"
)

// TestRunServeKeysStdinReportsPID: a sandbox's agent whose keys ask for
// its pid answers it first, before the caller preamble ack, so that the
// gateway kills that process, and no other of its name, when sandbox code
// stops it; unasked, it sends none.
func TestRunServeKeysStdinReportsPID(t *testing.T) {
	for _, tc := range []struct {
		name             string
		reportPID, calls bool
	}{{"pid and callers", true, true}, {"pid only", true, false}, {"callers only", false, true}, {"none", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newStdioKeysFixture(t)
			fx.keys.ReportPID = tc.reportPID
			if tc.calls {
				fx.keys.CallerPreamble = wire.CallerPreambleProxyV1
			}
			gwSide, agentSide := serveTCPPair(t)
			ctx, cancel := context.WithTimeout(context.Background(), serveWait)
			defer cancel()
			logs := new(serveLogBuffer)
			done := make(chan error, 1)
			go func() {
				done <- RunServe(ctx, []string{"--stdio", "--mux", "--keys-stdin"}, &ServeIO{Conn: agentSide, Stderr: logs})
			}()
			if err := WriteStdioKeys(gwSide, fx.keys); err != nil {
				t.Fatal(err)
			}
			conn, acks := ReadStdioAcks(gwSide)
			sess, err := bytestream.MuxClient(conn, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sess.Ping(); err != nil {
				t.Fatalf("ping: %v\n%s", err, logs.String())
			}
			want := 0
			if tc.reportPID {
				want = os.Getpid()
			}
			if acks.PID() != want || acks.Callers() != tc.calls {
				t.Errorf("pid %d, callers %v; want %d, %v", acks.PID(), acks.Callers(), want, tc.calls)
			}
			_ = sess.Close()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("RunServe: %v\n%s", err, logs.String())
				}
			case <-time.After(serveWait):
				t.Fatal("RunServe did not return after the tunnel closed")
			}
		})
	}
}

// TestStdioAcksRefused: acks that are not what an agent sends end the
// tunnel's first read with an error naming them.
func TestStdioAcksRefused(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"pid zero":       {PIDAck + "\x00\x00\x00\x00", "pid 0 out of range"},
		"pid over max":   {PIDAck + "\x7f\x00\x00\x00", "out of range"},
		"two pids":       {PIDAck + "\x00\x00\x00\x07" + PIDAck + "\x00\x00\x00\x08", "a second pid"},
		"unknown ack":    {"HGX1", `got "HGX1"`},
		"truncated pid":  {PIDAck + "\x00\x01", "pid ack: unexpected EOF"},
		"truncated acks": {"HG", "ack: unexpected EOF"},
	} {
		t.Run(name, func(t *testing.T) {
			a, b := net.Pipe()
			go func() {
				_, _ = b.Write([]byte(tc.in))
				_ = b.Close()
			}()
			conn, _ := ReadStdioAcks(a)
			defer conn.Close()
			_, err := conn.Read(make([]byte, 16))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("read: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
