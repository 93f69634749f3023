package client

import (
	"context"
	"crypto/ed25519"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/gatewaytest"
	"github.com/hostgate/hostgate/internal/store"
)

// TestDialEndedSandboxIsGone: Dial of a sandbox's host after its
// execution ended returns an *APIError with Code "gone", Status 410 and
// the end's Reason and EndedAt, as the executions API's answer gives them,
// from the real gateway's routes: the host's record (gone with the
// execution, or still there, offline, until its agent is forgotten) and
// the SSH stream's refused handshake alike. It was 404 not_found with
// neither, and an agent runtime could tell "sandbox gone" from "no such
// host" only by matching the message's words.
func TestDialEndedSandboxIsGone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g := gatewaytest.New(t, ctx, nil, nil)
	srv, st := g.Server, g.Store
	endedAt := time.Date(2026, 12, 3, 19, 4, 44, 512000000, time.UTC)
	srv.SetHostEnded(func(_ context.Context, id string) (string, time.Time) {
		if strings.HasPrefix(id, "sbx-") {
			return "terminated", endedAt
		}
		return "", time.Time{}
	})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	admin, _, err := st.CreateToken(ctx, store.TokenSpec{Role: store.RoleAdmin, Name: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Enroll(ctx, store.Enrollment{HostID: "sbx-ending", Kind: store.KindDocker, HostKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hostKey)))}); err != nil {
		t.Fatal(err)
	}
	c, err := New(ts.URL, admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()

	wantGone := func(what, id string, err error) {
		t.Helper()
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusGone || ae.Code != "gone" || ae.Reason != "terminated" || !ae.EndedAt.Equal(endedAt) {
			t.Errorf("%s of %s, whose execution ended: %v (%#v), want an *APIError 410 gone with reason terminated, endedAt %v", what, id, err, ae, endedAt)
			return
		}
		if want := "its execution ended (reason terminated): provision a new one (410 gone)"; !strings.Contains(err.Error(), want) || strings.Count(err.Error(), id) != 1 {
			t.Errorf("%s of %s: %q, want it to name the host once and say %q", what, id, err, want)
		}
	}
	for _, id := range []string{"sbx-forgotten", "sbx-ending"} {
		h, err := c.Dial(ctx, id)
		if err == nil {
			_ = h.Close()
		}
		wantGone("Dial", id, err)
		// The stream Dial's connect opens, refused at its handshake (the
		// execution may end between the record and the stream).
		conn, err := c.DialSSH(ctx, id)
		if err == nil {
			_ = conn.Close()
		}
		wantGone("DialSSH", id, err)
	}
	// A host that never was stays 404 not_found.
	if _, err := c.Dial(ctx, "never"); err == nil || !strings.Contains(err.Error(), "(404 not_found)") {
		t.Errorf("Dial of a host that never was: %v, want 404 not_found", err)
	}
}
