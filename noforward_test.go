package hostgate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hostgate/hostgate"
)

// TestForwardWithoutForwarderRejects is the seed's "forward: … Without
// it, host.forward rejects": every way to forward on a host whose
// connection has no Forward fails with ErrNotSupported (ENOTSUP), both
// kinds of Forward among them, which TestNoForwarderIsNotSupported did not
// call.
func TestForwardWithoutForwarderRejects(t *testing.T) {
	h := hostgate.New(hostgate.Info{}, func(context.Context) (*hostgate.Connection, error) {
		return &hostgate.Connection{Transport: &fakeTransport{}, Close: func() error { return nil }}, nil
	})
	defer h.Close()
	ctx := t.Context()
	for name, use := range map[string]func() error{
		"Forward local": func() error {
			_, err := h.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardLocal, Listen: "127.0.0.1:0", Connect: "127.0.0.1:1"})
			return err
		},
		"Forward remote": func() error {
			_, err := h.Forward(ctx, hostgate.ForwardSpec{Kind: hostgate.ForwardRemote, Listen: "127.0.0.1:0", Connect: "127.0.0.1:1"})
			return err
		},
		"Forwarder": func() error { _, err := h.Forwarder(ctx); return err },
		"Dial":      func() error { _, err := h.Dial(ctx, "tcp", "127.0.0.1:1"); return err },
		"DialEarly": func() error { _, err := h.DialEarly(ctx, "tcp", "127.0.0.1:1"); return err },
		"Listen":    func() error { _, err := h.Listen(ctx, "tcp", "127.0.0.1:0"); return err },
	} {
		if err := use(); !errors.Is(err, hostgate.ErrNotSupported) || !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s: %v, want ErrNotSupported", name, err)
		}
	}
	if h.TakesEarlyData(ctx) {
		t.Error("TakesEarlyData without a forwarder")
	}
}
