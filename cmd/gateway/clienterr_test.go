//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/client"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/sshlayer"
	syncfs "github.com/hostgate/hostgate/sync"
)

// TestClientErrorsNameTheHost: once a host's connection is lost, every
// error the Go client gives names the host and the operation, where they
// said "sshlayer: spawn: sshlayer: connection lost: EOF": a caller holding
// several hosts could not tell which went. Lost here between the caller
// and the gateway, where no reason from the gateway can name it.
func TestClientErrorsNameTheHost(t *testing.T) {
	ctx := testCtx(t)
	base, agentTok, clientTok := serveHost(t, ctx, "box")
	defer runAgent(t, ctx, base, agentTok)()
	cut := tcpCutter(t, strings.TrimPrefix(base, "http://"))
	h, err := client.Dial(ctx, "http://"+cut.addr, clientTok, "box")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	fsys, err := h.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	// A live connection's errors name the host too (Connection.Name), and
	// keep their type.
	if _, err := fsys.Stat(ctx, "/nonexistent-hostgate"); !os.IsNotExist(err) || !strings.HasPrefix(err.Error(), "host box: stat /nonexistent-hostgate") {
		t.Errorf("Stat of a missing file: %v; want a not-exist error naming host box", err)
	}
	// So do the synchronous filesystem's, over its own connection.
	sfs := syncfs.FromHost(h, nil)
	defer sfs.Close()
	if _, err := sfs.Stat("nonexistent-hostgate"); !os.IsNotExist(err) || err.Error() != "host box: stat nonexistent-hostgate: file does not exist" {
		t.Errorf("syncfs Stat of a missing file: %v; want a not-exist error naming host box", err)
	}
	cut.cut()
	_, execErr := h.Exec(ctx, []string{"true"}, hostgate.ExecOptions{})
	_, statErr := fsys.Stat(ctx, "/tmp")
	_, spawnErr := h.Spawn(ctx, []string{"true"}, hostgate.SpawnOptions{})
	_, dialErr := h.Dial(ctx, "tcp", "127.0.0.1:1")
	_, lnErr := h.Listen(ctx, "tcp", "127.0.0.1:0")
	_, readErr := fsys.Open(ctx, "/etc/hostname")
	for op, err := range map[string]error{"spawn": execErr, "stat /tmp": statErr, "spawn ": spawnErr, "dial 127.0.0.1:1": dialErr, "listen 127.0.0.1:0": lnErr, "open /etc/hostname": readErr} {
		if err == nil || !strings.Contains(err.Error(), "host box: ") || !strings.Contains(err.Error(), strings.TrimSpace(op)) {
			t.Errorf("%s after the connection was lost: %v; want an error naming host box and the operation", op, err)
		}
	}
}

// TestFirstConnectErrorsNameTheHost: a first connect that fails names the
// host once, in front as a connected Host's errors do, from client.Dial
// and from a LazyHost's first use, and keeps what callers test
// (errors.Is, *client.APIError). Before, none named it but the host key
// mismatch ("hostgate: connect: client: ssh to host box: …"), and a
// LazyHost's timeout said only "context deadline exceeded". Each says it
// once, plainly: before, the prefixes of every layer stacked up ("host
// box: hostgate: connect: client: host is offline: gateway: not connected
// to the gateway (503 host_offline)", "… client: ssh: sshlayer:
// handshake: ssh: handshake failed: sshlayer: host key mismatch: …",
// "… client: GET /v1/hosts/box: Get \"http://…/v1/hosts/box\": …")
// (found by the leftovers30 audit).
func TestFirstConnectErrorsNameTheHost(t *testing.T) {
	ctx := testCtx(t)
	base, agentTok, clientTok := serveHost(t, ctx, "box")
	stopAgent := runAgent(t, ctx, base, agentTok)
	defer stopAgent()

	// A gateway whose certificate answer pins another key than the
	// host's, as one would behind a proxy that swaps the host.
	other, err := sshlayer.GenerateSessionKey()
	if err != nil {
		t.Fatal(err)
	}
	bu, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	swap := httputil.NewSingleHostReverseProxy(bu)
	swap.ModifyResponse = func(r *http.Response) error {
		if !strings.HasSuffix(r.Request.URL.Path, "/certificates") || r.StatusCode != http.StatusOK {
			return nil
		}
		var cert map[string]any
		if err := json.NewDecoder(r.Body).Decode(&cert); err != nil {
			return err
		}
		cert["hostKey"] = sshlayer.Fingerprint(other.Signer.PublicKey())
		cert["hostPublicKey"] = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(other.Signer.PublicKey())))
		b, err := json.Marshal(cert)
		if err != nil {
			return err
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
		r.Header.Del("Content-Length")
		return nil
	}
	swapped := httptest.NewServer(swap)
	defer swapped.Close()

	// A gateway that accepts and never answers, for the timeout.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	})
	defer func() {
		_ = silent.Close()
		wg.Wait()
		for _, c := range held {
			_ = c.Close()
		}
	}()
	// A port nothing listens on, held for the test: one closed at once
	// may be another server's by the time the cases reach it.
	closedAddr := testenv.RefusedAddr(t)

	type check func(t *testing.T, err error)
	apiErr := func(code string) check {
		return func(t *testing.T, err error) {
			var ae *client.APIError
			if !errors.As(err, &ae) || ae.Code != code {
				t.Errorf("%v: want a *client.APIError %s", err, code)
			}
		}
	}
	is := func(target error) check {
		return func(t *testing.T, err error) {
			if !errors.Is(err, target) {
				t.Errorf("%v: want errors.Is %v", err, target)
			}
		}
	}
	getBox := func(addr string) string { return `host box: Get "http://` + addr + `/v1/hosts/box": ` }
	cases := []struct {
		name, url, token, host string
		timeout                bool
		// want, wantLazy: how the error of Dial, and of a LazyHost's
		// first use, begins.
		want, wantLazy string
		check          check
	}{
		{"no such host", base, clientTok, "nope", false,
			"host nope: gateway: not among the hosts this token reaches: ", "", apiErr("not_found")},
		{"refused token", base, "hg_refused", "box", false,
			"host box: gateway: invalid token: ", "", apiErr("unauthorized")},
		{"forbidden", base, agentTok, "box", false,
			"host box: gateway: agent tokens cannot reach hosts: this is the token an agent connects with; use a client token for the host (`gateway token create --role client --host ID`) or an admin token (403 forbidden)", "", apiErr("forbidden")},
		{"gateway unreachable", "http://" + closedAddr, clientTok, "box", false,
			getBox(closedAddr) + "dial tcp " + closedAddr + ": connect: connection refused", "", is(syscall.ECONNREFUSED)},
		{"timeout", "http://" + silent.Addr().String(), clientTok, "box", true,
			getBox(silent.Addr().String()), "host box: connect: context deadline exceeded", is(context.DeadlineExceeded)},
		{"host key mismatch", swapped.URL, clientTok, "box", false,
			"host box: sshlayer: host key mismatch: host presented its ssh-ed25519 key ", "", func(t *testing.T, err error) {
				is(sshlayer.ErrHostKeyMismatch)(t, err)
				// The pin is the gateway's key itself: the mismatch
				// says both keys, and no advice on pinning a key of
				// another type, which a gateway's caller cannot do.
				want := "host presented its ssh-ed25519 key " + hostKeyOf(t, ctx, base, clientTok) + ", pinned " + sshlayer.Fingerprint(other.Signer.PublicKey()) + " (ssh-ed25519 key)"
				if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "pin that public key") {
					t.Errorf("%v: want it to say %q", err, want)
				}
			}},
		{"offline", base, clientTok, "box", false,
			"host box: offline: not connected to the gateway (503 host_offline)", "", is(client.ErrOffline)},
	}
	for _, c := range cases {
		if c.name == "offline" {
			stopAgent()
			waitOffline(t, ctx, base, clientTok, "box")
		}
		for _, lazy := range []bool{false, true} {
			callCtx, cancel := ctx, func() {}
			if c.timeout {
				callCtx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
			}
			var err error
			if lazy {
				cl, nerr := client.New(c.url, c.token, nil)
				if nerr != nil {
					t.Fatal(nerr)
				}
				h := cl.LazyHost(c.host)
				_, err = h.Exec(callCtx, []string{"true"}, hostgate.ExecOptions{})
				_ = h.Close()
			} else {
				var h *hostgate.Host
				h, err = client.Dial(callCtx, c.url, c.token, c.host)
				if h != nil {
					_ = h.Close()
				}
			}
			cancel()
			name := fmt.Sprintf("%s (lazy %v)", c.name, lazy)
			if err == nil {
				t.Errorf("%s: no error", name)
				continue
			}
			t.Logf("%s: %v", name, err)
			if !strings.HasPrefix(err.Error(), "host "+c.host+": ") || strings.Count(err.Error(), "host "+c.host) != 1 {
				t.Errorf("%s: %v; want it to begin with host %s, and name it only there", name, err, c.host)
			}
			want := c.want
			if lazy && c.wantLazy != "" {
				want = c.wantLazy
			}
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("%s: %v\nwant it to begin %q", name, err, want)
			}
			t.Run(name, func(t *testing.T) { c.check(t, err) })
		}
	}
}

// hostKeyOf is the fingerprint of host box's pinned key.
func hostKeyOf(t *testing.T, ctx context.Context, base, token string) string {
	t.Helper()
	c, err := client.New(base, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Host(ctx, "box")
	if err != nil {
		t.Fatal(err)
	}
	return rec.HostKey
}

// waitOffline waits until the gateway says host id is not connected.
func waitOffline(t *testing.T, ctx context.Context, base, token, id string) {
	t.Helper()
	c, err := client.New(base, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	for {
		rec, err := c.Host(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Connected {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the gateway still says the host is connected")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
