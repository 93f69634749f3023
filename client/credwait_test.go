package client

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
)

// A connect waiting for the certificate another connect to the same host
// is asking for gives up with its ctx: two Hosts of one host id share
// their credentials, and the second one's Close (which cancels its
// connect) waited for the first's certificate request, up to the API
// call timeout, as did a synchronous filesystem's connect beside it.
func TestCredentialsWaitHonoursCtx(t *testing.T) {
	asked, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	srv := offlineStandIn(t, nil, func() {
		held := false
		first.Do(func() { held = true })
		if held {
			close(asked)
			<-release
		}
	})
	c, err := New(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	h1 := c.LazyHost("box")
	done1 := make(chan struct{})
	go func() {
		defer close(done1)
		_, _ = h1.Exec(context.Background(), []string{"true"}, hostgate.ExecOptions{})
	}()
	<-asked // h1's connect holds the certificate request

	h2 := c.LazyHost("box")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := h2.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err == nil {
		t.Fatal("exec on a host whose certificate is held succeeded")
	}
	closed := make(chan struct{})
	go func() { _ = h2.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Error("Close of a Host waited for another Host's certificate request")
	}
	close(release)
	<-closed
	_ = h1.Close()
	<-done1
}
