//go:build unix

package client

import (
	"strings"
	"testing"

	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/testenv"
)

// TestDirectAddressesBounded: a certificate naming more direct addresses
// than a gateway publishes (wire.MaxDirectAddrs, the agent's --direct
// bound) has the client try that many, not all: it dialed every address a
// gateway's answer listed at once, a goroutine and a socket each, and a
// 16 MiB answer lists hundreds of thousands.
func TestDirectAddressesBounded(t *testing.T) {
	refused := make([]string, 3*wire.MaxDirectAddrs)
	for i := range refused {
		refused[i] = testenv.RefusedAddr(t)
	}
	g := newDirectGateway(t, func() []string { return refused })
	c, err := New(g.url, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	h, err := c.Dial(t.Context(), "box")
	if err != nil {
		t.Fatal(err)
	}
	execEcho(t, h)
	_ = h.Close()
	_, err = c.DirectPath("box")
	if err == nil {
		t.Fatal("DirectPath: no failure, want the refused addresses'")
	}
	tried := 0
	for _, a := range refused {
		if strings.Contains(err.Error(), a+": ") {
			tried++
		}
	}
	if tried == 0 || tried > wire.MaxDirectAddrs {
		t.Fatalf("%d of the certificate's %d addresses tried, want at most %d: %v", tried, len(refused), wire.MaxDirectAddrs, err)
	}
}
