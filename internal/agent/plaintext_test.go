package agent

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/internal/testenv"
)

// TestConnectWarnsOfPlaintextGateway: an agent given an http:// (or
// ws://) gateway on another machine says, as it starts, that its token and
// its first pin of the gateway's CA cross the network unencrypted, and
// what to give instead; it said nothing, and whoever was on the path
// could take the token, or pin a CA of theirs and log in to the host. A
// gateway on this machine (gateway dev, a proxy beside it) or one over
// TLS draws no warning.
func TestConnectWarnsOfPlaintextGateway(t *testing.T) {
	for _, tc := range []struct {
		url  string
		warn bool
	}{
		{"http://gw.example.invalid:8080", true},
		{"ws://10.0.0.7", true},
		{"HTTP://gw.example.invalid", true},
		{"https://gw.example.invalid", false},
		{"wss://gw.example.invalid", false},
		{"http://127.0.0.1:8080", false},
		{"http://localhost:8080", false},
		{"http://[::1]:8080", false},
	} {
		logs := &testenv.LogBuffer{}
		_, err := newConnector(&ConnectConfig{GatewayURL: tc.url, Token: "t", StateDir: t.TempDir(),
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		got := strings.Contains(logs.String(), "unencrypted")
		if got != tc.warn {
			t.Errorf("%s: warned %v, want %v; logs:\n%s", tc.url, got, tc.warn, logs)
		}
		if got && !strings.Contains(logs.String(), "https://") {
			t.Errorf("%s: the warning does not say to give https://:\n%s", tc.url, logs)
		}
	}
}
