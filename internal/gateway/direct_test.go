package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/testenv"
)

// directAgent is a fake agent with a direct listener: its connect request
// lists the listener's addresses, and it opens its control stream on the
// tunnel as an agent does once the tunnel is up.
type directAgent struct {
	*fakeAgent
	ctl net.Conn
	r   *bufio.Reader
}

const testDirectAddrs = "198.51.100.7:2222,Agent.Example:2222"

// dialDirect connects a fake agent of host hostID's agent token secret
// whose listener is at addrs, and opens its control stream.
func (e *env) dialDirect(t *testing.T, agentSecret, addrs string) *directAgent {
	t.Helper()
	_, k := newKey(t)
	return e.dialDirectKey(t, agentSecret, k, addrs)
}

// dialDirectKey is dialDirect with the host key k.
func (e *env) dialDirectKey(t *testing.T, agentSecret, k, addrs string) *directAgent {
	t.Helper()
	h := http.Header{}
	h.Set(wire.HeaderDirect, addrs)
	a, err := e.dialAgentHeader(agentSecret, k, hostgate.Info{}, signerOf(k), h)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.resp.Header.Get(wire.HeaderDirect); got != wire.DirectOn {
		t.Fatalf("the gateway's answer to an agent with a direct listener: %s %q, want %q", wire.HeaderDirect, got, wire.DirectOn)
	}
	st, err := a.sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	return &directAgent{fakeAgent: a, ctl: st, r: wire.NewDirectReader(st)}
}

func (d *directAgent) send(t *testing.T, m wire.DirectMsg) {
	t.Helper()
	if _, err := d.ctl.Write(wire.AppendDirectMsg(nil, m)); err != nil {
		t.Fatal(err)
	}
}

// read is the gateway's next line; the deadline only keeps a broken
// gateway from hanging the test.
func (d *directAgent) read(t *testing.T) wire.DirectMsg {
	t.Helper()
	_ = d.ctl.SetReadDeadline(time.Now().Add(30 * time.Second))
	m, err := wire.ReadDirectMsg(d.r)
	if err != nil {
		t.Fatalf("the gateway's control line: %v", err)
	}
	return m
}

// ask sends DirectOpen for connection id with tokenID and returns the
// gateway's answer.
func (d *directAgent) ask(t *testing.T, id uint64, tokenID string) wire.DirectMsg {
	t.Helper()
	d.send(t, wire.DirectMsg{Op: wire.DirectOpen, ID: id, Serial: 42, KeyID: "caller", TokenID: tokenID, Remote: "192.0.2.9:50000"})
	m := d.read(t)
	if m.ID != id {
		t.Fatalf("answer for connection %d, want %d: %+v", m.ID, id, m)
	}
	return m
}

// tokenOf is the store's token of secret.
func (e *env) tokenOf(secret string) store.Token {
	e.t.Helper()
	tok, err := e.store.LookupToken(e.ctx, secret)
	if err != nil {
		e.t.Fatal(err)
	}
	return tok
}

// waitFor polls cond until it holds; the bound only keeps a broken
// gateway from hanging the test.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i == 3000 {
			t.Fatalf("%s: not after 30 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDirectAdmission: the gateway admits a direct connection whose
// certificate's token is a live client token reaching the host, records
// it in the audit log with the caller's address as the agent saw it, logs
// its start and end (with the bytes the agent reports) and counts it; it
// refuses, saying why, a revoked, an expired, another host's, an agent's
// and an unknown token.
func TestDirectAdmission(t *testing.T) {
	e := newEnv(t, nil)
	var logs testenv.LogBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
	client := e.token(store.RoleClient, "h")
	revoked := e.token(store.RoleClient, "h")
	revokedID := e.tokenOf(revoked).ID
	e.revoke(revoked)
	other := e.token(store.RoleClient, "other")
	_, expired, err := e.store.CreateToken(e.ctx, store.TokenSpec{Role: store.RoleClient, Hosts: []string{"h"}, Name: "expired", ExpiresAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	agentSecret := e.token(store.RoleAgent, "h")
	a := e.dialDirect(t, agentSecret, testDirectAddrs)

	m := a.ask(t, 1, e.tokenOf(client).ID)
	if m.Op != wire.DirectAdmit {
		t.Fatalf("a live client token of the host: %+v, want admitted", m)
	}
	sessions, err := e.store.Sessions(e.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(sessions, func(s store.Session) bool {
		return s.Kind == "ssh-direct" && s.HostID == "h" && s.TokenName == "client-h" && s.RemoteAddr == "192.0.2.9:50000"
	}) {
		t.Errorf("audit log %+v: no ssh-direct entry of client-h for h from the caller's address", sessions)
	}
	if !strings.Contains(e.metricsText(), "hostgate_direct_sessions_open 1") {
		t.Error("hostgate_direct_sessions_open is not 1 with one direct session open")
	}

	for _, c := range []struct {
		what, tokenID, want string
	}{
		{"a revoked token", revokedID, "revoked or has expired"},
		{"an expired token", expired.ID, "revoked or has expired"},
		{"another host's client token", e.tokenOf(other).ID, "host h: not among the hosts the certificate's token reaches"},
		{"an agent token", e.tokenOf(agentSecret).ID, "agent token"},
		{"an unknown token id", "no-such-token", "revoked or has expired"},
	} {
		m := a.ask(t, 2, c.tokenID)
		if m.Op != wire.DirectRefuse || !strings.Contains(m.Reason, c.want) {
			t.Errorf("%s: %+v, want refused saying %q", c.what, m, c.want)
		}
		a.send(t, wire.DirectMsg{Op: wire.DirectClosed, ID: 2}) // the agent reports every connection it ends
	}

	a.send(t, wire.DirectMsg{Op: wire.DirectClosed, ID: 1, ToHost: 1234, FromHost: 56789, Reason: "the caller closed the connection"})
	waitFor(t, "the closed direct session leaves the gauge", func() bool {
		return strings.Contains(e.metricsText(), "hostgate_direct_sessions_open 0")
	})
	if n := e.srv.live.count(); n != 1 {
		t.Errorf("%d live sessions after the direct one closed, want 1 (the tunnel)", n)
	}
	out := logs.String()
	for _, want := range []string{
		`msg="direct start" host=h remote=192.0.2.9:50000 direct=1 token=client-h`,
		`msg="direct end" host=h remote=192.0.2.9:50000 direct=1 token=client-h toHost=1234 fromHost=56789 reason="the caller closed the connection"`,
		`msg="direct refused" host=h remote=192.0.2.9:50000 direct=2 token=agent-h`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	metrics := e.metricsText()
	for _, want := range []string{`hostgate_direct_admissions_total{result="admitted"} 1`, `hostgate_direct_admissions_total{result="refused"} 5`, `hostgate_session_starts_total{kind="ssh-direct"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestDirectEndsWhenTokenRevoked: a token revoked while its direct session
// is open (`gateway token revoke`, found by the recheck) has the gateway
// tell the agent to end that session, saying why; another token's session
// through the same tunnel goes on, and the agent's report of the end is
// logged as the session's end.
func TestDirectEndsWhenTokenRevoked(t *testing.T) {
	e := newEnv(t, &Config{TokenRecheck: 20 * time.Millisecond})
	var logs testenv.LogBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
	client := e.token(store.RoleClient, "h")
	admin := e.token(store.RoleAdmin)
	a := e.dialDirect(t, e.token(store.RoleAgent, "h"), testDirectAddrs)
	if m := a.ask(t, 7, e.tokenOf(client).ID); m.Op != wire.DirectAdmit {
		t.Fatalf("client: %+v", m)
	}
	if m := a.ask(t, 8, e.tokenOf(admin).ID); m.Op != wire.DirectAdmit {
		t.Fatalf("admin: %+v", m)
	}
	e.revoke(client)
	m := a.read(t)
	if m.Op != wire.DirectEnd || m.ID != 7 || m.Reason != "host h: the session's token was revoked" {
		t.Fatalf("after the client token's revocation: %+v, want the end of session 7 saying its token was revoked", m)
	}
	a.send(t, wire.DirectMsg{Op: wire.DirectClosed, ID: 7, ToHost: 10, FromHost: 20, Reason: "the gateway ended it: " + m.Reason})
	// The admin's session is still the gateway's: its end is logged when
	// the agent reports it, and nothing else was sent for it.
	a.send(t, wire.DirectMsg{Op: wire.DirectClosed, ID: 8})
	waitFor(t, "both direct sessions closed", func() bool { return strings.Count(logs.String(), `msg="direct end"`) == 2 })
	out := logs.String()
	if !strings.Contains(out, `msg="session ended: its token was revoked" kind=ssh-direct host=h token=client-h`) ||
		!strings.Contains(out, `msg="direct end" host=h remote=192.0.2.9:50000 direct=7 token=client-h toHost=10 fromHost=20`) {
		t.Errorf("the revoked session's end is not logged:\n%s", out)
	}
	if n := e.srv.live.count(); n != 1 {
		t.Errorf("%d live sessions, want 1 (the tunnel)", n)
	}
}

// TestDirectEndsWhenTokenExpires: a token that expires while its direct
// session is open has the session ended at the next recheck, saying so.
func TestDirectEndsWhenTokenExpires(t *testing.T) {
	e := newEnv(t, &Config{TokenRecheck: time.Hour}) // rechecked by hand
	_, tok, err := e.store.CreateToken(e.ctx, store.TokenSpec{Role: store.RoleClient, Hosts: []string{"h"}, Name: "short", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	a := e.dialDirect(t, e.token(store.RoleAgent, "h"), testDirectAddrs)
	if m := a.ask(t, 3, tok.ID); m.Op != wire.DirectAdmit {
		t.Fatalf("%+v", m)
	}
	if err := e.srv.live.recheck(e.ctx, time.Now().Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if m := a.read(t); m.Op != wire.DirectEnd || m.ID != 3 || m.Reason != "host h: the session's token was expired" {
		t.Fatalf("after the token's expiry: %+v, want the end of session 3 saying its token expired", m)
	}
}

// TestDirectRemoteCannotForgeAuditEntries: the caller's address a direct
// session's audit entry records is the agent's word, and a hostile agent's
// is not an address: newlines, tabs and a terminal's escapes, which
// `gateway audit` printed as they were, as rows of its own (another host,
// another token) and as commands to the admin's terminal. The entry holds
// an address as an address, and anything else quoted, on one line.
func TestDirectRemoteCannotForgeAuditEntries(t *testing.T) {
	e := newEnv(t, nil)
	client := e.token(store.RoleClient, "h")
	a := e.dialDirect(t, e.token(store.RoleAgent, "h"), testDirectAddrs)
	forged := "192.0.2.9:50000\n2026-01-01T00:00:00Z\tssh\tprod\tadmin\t10.0.0.1\x1b]0;owned\x07\x1b[2J"
	a.send(t, wire.DirectMsg{Op: wire.DirectOpen, ID: 1, TokenID: e.tokenOf(client).ID, Remote: forged})
	if m := a.read(t); m.Op != wire.DirectAdmit {
		t.Fatalf("a live client token of the host: %+v, want admitted", m)
	}
	a.send(t, wire.DirectMsg{Op: wire.DirectOpen, ID: 2, TokenID: e.tokenOf(client).ID, Remote: "[2001:db8::7]:50001"})
	if m := a.read(t); m.Op != wire.DirectAdmit {
		t.Fatalf("a live client token of the host: %+v, want admitted", m)
	}
	sessions, err := e.store.Sessions(e.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var remotes []string
	for _, s := range sessions {
		if s.Kind == "ssh-direct" {
			remotes = append(remotes, s.RemoteAddr)
		}
	}
	if len(remotes) != 2 || remotes[0] != "[2001:db8::7]:50001" {
		t.Fatalf("direct sessions' recorded addresses %q, want two, the newest [2001:db8::7]:50001", remotes)
	}
	if strings.ContainsFunc(remotes[1], func(r rune) bool { return r < ' ' || r == 0x7f }) || !strings.Contains(remotes[1], "192.0.2.9:50000") {
		t.Errorf("the hostile agent's address recorded as %q: want it on one line, without control characters", remotes[1])
	}
}

// TestDirectAuditRequired: a direct session is recorded in the audit log
// like a relayed one, and with --audit-required it is refused, saying why,
// while the log cannot be written, then admitted again once it can; without
// --audit-required it goes on unrecorded.
func TestDirectAuditRequired(t *testing.T) {
	for _, required := range []bool{true, false} {
		var fs *fullStore
		e := newEnvWrapped(t, &Config{AuditRequired: required}, func(st store.Store) store.Store { fs = &fullStore{Store: st}; return fs })
		e.srv.ready.ttl = 0
		client := e.tokenOf(e.token(store.RoleClient, "h")).ID
		a := e.dialDirect(t, e.token(store.RoleAgent, "h"), testDirectAddrs)
		if m := a.ask(t, 1, client); m.Op != wire.DirectAdmit {
			t.Fatalf("audit log writable: %+v", m)
		}
		fs.full.Store(true)
		for id := uint64(2); id <= 3; id++ { // the one that finds the outage, and the next
			m := a.ask(t, id, client)
			switch {
			case required && (m.Op != wire.DirectRefuse || !strings.Contains(m.Reason, "audit log cannot be written") || !strings.Contains(m.Reason, "--audit-required")):
				t.Errorf("--audit-required, the audit log full, session %d: %+v, want refused naming the audit log and the flag", id, m)
			case !required && m.Op != wire.DirectAdmit:
				t.Errorf("the audit log full, without --audit-required, session %d: %+v, want admitted", id, m)
			}
		}
		// The refused session is not one the log lost: only the one
		// whose write found the outage counts as unrecorded.
		if want := map[bool]string{true: "hostgate_audit_write_failures_total 1", false: "hostgate_audit_write_failures_total 2"}[required]; !strings.Contains(e.metricsText(), want) {
			t.Errorf("required %v: metrics lack %s", required, want)
		}
		fs.full.Store(false)
		if m := a.ask(t, 4, client); m.Op != wire.DirectAdmit {
			t.Errorf("audit log writable again (required %v): %+v", required, m)
		}
	}
}

// TestDirectOff: with direct sessions off (--direct-sessions=off) the gateway
// ignores the agent's addresses, even malformed ones: it does not answer
// DirectOn, publishes none, and takes no control stream.
func TestDirectOff(t *testing.T) {
	e := newEnv(t, &Config{DirectOff: true})
	_, k := newKey(t)
	h := http.Header{}
	h.Set(wire.HeaderDirect, "not an address")
	a, err := e.dialAgentHeader(e.token(store.RoleAgent, "h"), k, hostgate.Info{}, signerOf(k), h)
	if err != nil {
		t.Fatalf("an agent with a direct listener, direct sessions off: %v", err)
	}
	if got := a.resp.Header.Get(wire.HeaderDirect); got != "" {
		t.Errorf("answer's %s %q, want none", wire.HeaderDirect, got)
	}
	var rec HostRecord
	if code, c := e.call("GET", "/v1/hosts/h", e.token(store.RoleAdmin), nil, &rec); code != 200 || rec.Direct != nil || !rec.Connected {
		t.Errorf("host record %d %s %+v, want connected without direct addresses", code, c, rec)
	}
	// Nothing takes the agent's stream, so nothing answers on it. A read
	// that times out is what an answer-less stream gives; the short
	// deadline could only let a wrong gateway pass, never fail a right one.
	st, err := a.sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write(wire.AppendDirectMsg(nil, wire.DirectMsg{Op: wire.DirectOpen, ID: 1, TokenID: "x"})); err != nil {
		t.Fatal(err)
	}
	_ = st.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := st.Read(make([]byte, 1)); n != 0 || !isTimeout(err) {
		t.Errorf("the gateway answered on a stream with direct sessions off: %d bytes, %v", n, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestDirectBadHeader: an agent whose direct addresses are not host:port
// is refused with a 400 naming the header and what it wants.
func TestDirectBadHeader(t *testing.T) {
	e := newEnv(t, nil)
	agentSecret := e.token(store.RoleAgent, "h")
	for _, bad := range []string{"", "no-port", "0.0.0.0:22", "a:1,b:2,c:3,d:4,e:5,f:6,g:7,h:8,i:9", "host:99999"} {
		_, k := newKey(t)
		h := http.Header{}
		h.Set(wire.HeaderDirect, bad)
		_, err := e.dialAgentHeader(agentSecret, k, hostgate.Info{}, signerOf(k), h)
		var he *bytestream.HandshakeError
		if !errors.As(err, &he) || he.StatusCode != http.StatusBadRequest || !strings.Contains(he.Body, wire.HeaderDirect+": ") ||
			!strings.Contains(he.Body, "agent connect --direct ADDR") {
			t.Errorf("%s %q: %v, want 400 naming the header and the fix", wire.HeaderDirect, bad, err)
		}
	}
	if e.srv.tunnels.Connected("h") {
		t.Error("a refused agent's host is connected")
	}
}

// TestDirectOneControlStream: the gateway takes one stream of an agent's
// tunnel, its control stream, and closes any other the agent opens (with
// a tunnel whose mux lets the agent open more than one, as a sandbox's or
// a tuned one may), logging it; the control stream goes on.
func TestDirectOneControlStream(t *testing.T) {
	mux := DefaultTunnelMux()
	mux.MaxStreams, mux.AcceptBacklog = 4, 4
	e := newEnv(t, &Config{TunnelMux: mux})
	var logs testenv.LogBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
	client := e.tokenOf(e.token(store.RoleClient, "h")).ID
	a := e.dialDirect(t, e.token(store.RoleAgent, "h"), testDirectAddrs)
	if m := a.ask(t, 1, client); m.Op != wire.DirectAdmit {
		t.Fatalf("%+v", m)
	}
	second, err := a.sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.Write(wire.AppendDirectMsg(nil, wire.DirectMsg{Op: wire.DirectOpen, ID: 2, TokenID: client})); err != nil {
		t.Fatal(err)
	}
	_ = second.SetReadDeadline(time.Now().Add(30 * time.Second))
	if b, err := io.ReadAll(second); err != nil || len(b) != 0 {
		t.Errorf("a second stream: read %q, %v; want it closed unanswered", b, err)
	}
	if !strings.Contains(logs.String(), "agent opened another stream on its tunnel; closed it") {
		t.Errorf("the second stream is not logged:\n%s", logs.String())
	}
	if m := a.ask(t, 3, client); m.Op != wire.DirectAdmit {
		t.Errorf("the control stream after the second stream: %+v", m)
	}
}

// TestDirectMalformedLineEndsControl: a line that is not a control line
// ends the control stream (the agent then ends its direct sessions) and
// the gateway forgets its sessions, logging why; the tunnel stays.
func TestDirectMalformedLineEndsControl(t *testing.T) {
	for _, bad := range []string{"not json\n", `{"op":"admit","id":1}` + "\n", `{"op":"open","id":2}` + "\n", strings.Repeat("x", wire.MaxDirectMsgLen+1) + "\n"} {
		e := newEnv(t, nil)
		var logs testenv.LogBuffer
		e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
		a := e.dialDirect(t, e.token(store.RoleAgent, "h"), testDirectAddrs)
		if m := a.ask(t, 1, e.tokenOf(e.token(store.RoleAdmin)).ID); m.Op != wire.DirectAdmit {
			t.Fatalf("%+v", m)
		}
		if _, err := a.ctl.Write([]byte(bad)); err != nil {
			t.Fatal(err)
		}
		_ = a.ctl.SetReadDeadline(time.Now().Add(30 * time.Second))
		if b, err := io.ReadAll(a.r); err != nil || len(b) != 0 {
			t.Errorf("%.40q: the control stream read %q, %v; want it ended", bad, b, err)
		}
		waitFor(t, "the ended control stream's session forgotten", func() bool {
			return e.srv.live.count() == 1 && strings.Contains(logs.String(), `msg="direct end"`)
		})
		out := logs.String()
		if !strings.Contains(out, "direct control stream: the agent sent") || !strings.Contains(out, `msg="direct end"`) {
			t.Errorf("%.40q: the control stream's end is not logged:\n%s", bad, out)
		}
		if !strings.Contains(e.metricsText(), "hostgate_direct_sessions_open 0") {
			t.Errorf("%.40q: the gauge still counts the forgotten session", bad)
		}
		if !e.srv.tunnels.Connected("h") {
			t.Errorf("%.40q: the tunnel ended with its control stream", bad)
		}
	}
}

// TestDirectBoundedPerTunnel: past MaxDirectPerTunnel open sessions a
// tunnel's next is refused, saying so; one closing makes room.
func TestDirectBoundedPerTunnel(t *testing.T) {
	e := newEnv(t, &Config{MaxDirectPerTunnel: 2})
	client := e.tokenOf(e.token(store.RoleClient, "h")).ID
	a := e.dialDirect(t, e.token(store.RoleAgent, "h"), testDirectAddrs)
	for id := uint64(1); id <= 2; id++ {
		if m := a.ask(t, id, client); m.Op != wire.DirectAdmit {
			t.Fatalf("session %d: %+v", id, m)
		}
	}
	if m := a.ask(t, 3, client); m.Op != wire.DirectRefuse || !strings.Contains(m.Reason, "2 direct sessions open") {
		t.Errorf("a third: %+v, want refused naming the bound", m)
	}
	a.send(t, wire.DirectMsg{Op: wire.DirectClosed, ID: 3})
	a.send(t, wire.DirectMsg{Op: wire.DirectClosed, ID: 1})
	if m := a.ask(t, 4, client); m.Op != wire.DirectAdmit {
		t.Errorf("after one closed: %+v", m)
	}
}

// TestDirectPublished: the addresses an agent's tunnel advertised are
// published with its host (GET /v1/hosts, /v1/hosts/{id}, a
// certificate's answer) while that tunnel serves it, and go with it: a
// tunnel that replaced it without addresses has none, and so has a host
// whose tunnel ended, whose direct sessions the gateway forgets.
func TestDirectPublished(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	agentSecret := e.token(store.RoleAgent, "h")
	_, k := newKey(t)
	a := e.dialDirectKey(t, agentSecret, k, testDirectAddrs)
	want := []string{"198.51.100.7:2222", "agent.example:2222"}
	var rec HostRecord
	if e.call("GET", "/v1/hosts/h", admin, nil, &rec); !slices.Equal(rec.Direct, want) {
		t.Errorf("GET /v1/hosts/h direct %q, want %q", rec.Direct, want)
	}
	var list struct{ Hosts []HostRecord }
	if e.call("GET", "/v1/hosts", admin, nil, &list); len(list.Hosts) != 1 || !slices.Equal(list.Hosts[0].Direct, want) {
		t.Errorf("GET /v1/hosts %+v, want h with direct %q", list.Hosts, want)
	}
	_, userPub := newKey(t)
	var cert certResponse
	if code, c := e.call("POST", "/v1/hosts/h/certificates", admin, certRequest{PublicKey: userPub}, &cert); code != 200 || !slices.Equal(cert.Direct, want) {
		t.Errorf("certificate: %d %s direct %q, want %q", code, c, cert.Direct, want)
	}
	if m := a.ask(t, 1, e.tokenOf(admin).ID); m.Op != wire.DirectAdmit {
		t.Fatalf("%+v", m)
	}

	// The tunnel ends: its addresses and sessions go.
	a.close()
	waitFor(t, "the ended tunnel's host offline", func() bool { return !e.srv.tunnels.Connected("h") })
	waitFor(t, "the ended tunnel's direct session forgotten", func() bool { return e.srv.live.count() == 0 })
	rec = HostRecord{}
	if e.call("GET", "/v1/hosts/h", admin, nil, &rec); rec.Direct != nil {
		t.Errorf("an offline host's direct addresses %q, want none", rec.Direct)
	}
	if !strings.Contains(e.metricsText(), "hostgate_direct_sessions_open 0") {
		t.Error("the ended tunnel's direct session is still counted")
	}

	// Back with addresses, then replaced by a tunnel without.
	e.dialDirectKey(t, agentSecret, k, "192.0.2.1:22")
	if e.call("GET", "/v1/hosts/h", admin, nil, &rec); !slices.Equal(rec.Direct, []string{"192.0.2.1:22"}) {
		t.Errorf("direct %q, want the new tunnel's", rec.Direct)
	}
	if _, err := e.dialAgent(agentSecret, k, hostgate.Info{}); err != nil {
		t.Fatal(err)
	}
	rec = HostRecord{}
	if e.call("GET", "/v1/hosts/h", admin, nil, &rec); rec.Direct != nil || !rec.Connected {
		t.Errorf("replaced by a tunnel without addresses: %+v, want connected without direct addresses", rec)
	}
}

// preferDirect dials GET /v1/hosts/{id}/ssh as gateway proxy does when it
// would rather dial the agent itself (wire.DirectPrefer): the answer is a
// relay (conn), or the host's direct addresses (answer).
func (e *env) preferDirect(t *testing.T, id, token string) (conn net.Conn, answer *bytestream.HandshakeError, err error) {
	t.Helper()
	return e.directRequest(t, id, token, wire.DirectPrefer)
}

// directRequest is preferDirect with HeaderDirect's value how: answers
// of 200 (addresses) and 204 (none, to DirectAsk) come back as answer.
func (e *env) directRequest(t *testing.T, id, token, how string) (conn net.Conn, answer *bytestream.HandshakeError, err error) {
	t.Helper()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	h.Set(wire.HeaderDirect, how)
	c, _, err := bytestream.DialWebSocket(e.ctx, e.ts.URL+"/v1/hosts/"+id+"/ssh", &bytestream.WebSocketOptions{Header: h})
	if err == nil {
		t.Cleanup(func() { _ = c.Close() })
		return c, nil, nil
	}
	var he *bytestream.HandshakeError
	if errors.As(err, &he) && (he.StatusCode == http.StatusOK || he.StatusCode == http.StatusNoContent) {
		return nil, he, nil
	}
	return nil, nil, err
}

// directAndPlainHosts is an env whose log the test reads, with host h,
// whose agent (host key k) has direct addresses, host plain, whose agent
// has none, and a client token for both.
func directAndPlainHosts(t *testing.T) (e *env, logs *testenv.LogBuffer, k, client string) {
	t.Helper()
	e = newEnv(t, nil)
	logs = new(testenv.LogBuffer)
	e.srv.logger = slog.New(slog.NewTextHandler(logs, nil))
	_, k = newKey(t)
	e.dialDirectKey(t, e.token(store.RoleAgent, "h"), k, testDirectAddrs)
	_, plainKey := newKey(t)
	if _, err := e.dialAgent(e.token(store.RoleAgent, "plain"), plainKey, hostgate.Info{}); err != nil {
		t.Fatal(err)
	}
	return e, logs, k, e.token(store.RoleClient, "h", "plain")
}

// TestDirectAskAnswer: a caller that only asks for the direct path
// (gateway proxy --fdpass) gets a host's addresses as one that prefers
// it does, and for a host without them 204 instead of a relay: nothing
// audited, no relay started. The relay's refusals come first, as for
// DirectPrefer.
func TestDirectAskAnswer(t *testing.T) {
	e, logs, _, client := directAndPlainHosts(t)

	conn, answer, err := e.directRequest(t, "h", client, wire.DirectAsk)
	if err != nil || answer == nil || answer.StatusCode != http.StatusOK {
		t.Fatalf("a host with direct addresses: relayed %v, answered %+v, %v; want its addresses", conn != nil, answer, err)
	}
	if a, _, err := wire.ParseDirectAnswer([]byte(answer.Body)); err != nil || len(a.Direct) != 2 {
		t.Fatalf("answer %q: %+v, %v", answer.Body, a, err)
	}
	conn, answer, err = e.directRequest(t, "plain", client, wire.DirectAsk)
	if err != nil || answer == nil || answer.StatusCode != http.StatusNoContent {
		t.Fatalf("a host without direct addresses: relayed %v, answered %+v, %v; want 204", conn != nil, answer, err)
	}
	if sessions := e.callerSessions(t); len(sessions) != 0 {
		t.Errorf("audit log %+v after asks alone; want nothing", sessions)
	}
	if strings.Contains(logs.String(), "relay start") {
		t.Errorf("a relay started for an ask:\n%s", logs.String())
	}
	for _, tok := range []string{e.token(store.RoleClient, "other"), e.token(store.RoleAgent, "plain"), "nope"} {
		_, answer, err := e.directRequest(t, "plain", tok, wire.DirectAsk)
		var he *bytestream.HandshakeError
		if answer != nil || !errors.As(err, &he) || he.StatusCode < 400 {
			t.Errorf("token %.12s…: answer %+v, %v; want the relay's refusal", tok, answer, err)
		}
	}
}

// callerSessions is the audit log's entries but the tunnels'.
func (e *env) callerSessions(t *testing.T) []store.Session {
	t.Helper()
	all, err := e.store.Sessions(e.ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(all, func(s store.Session) bool { return s.Kind == "tunnel" })
}

// TestDirectPreferAnswer: a caller that prefers the direct path gets,
// for a host with direct addresses, the addresses and the host's pinned
// key instead of a relay, with nothing audited and no relay started (no
// session happened); for a host without addresses, a relay at once; and
// the relay's own refusals (another host's token, an agent token).
func TestDirectPreferAnswer(t *testing.T) {
	e, logs, k, client := directAndPlainHosts(t)

	conn, answer, err := e.preferDirect(t, "h", client)
	if err != nil || answer == nil {
		t.Fatalf("a host with direct addresses: relayed %v, %v; want its addresses", conn != nil, err)
	}
	a, pub, err := wire.ParseDirectAnswer([]byte(answer.Body))
	if err != nil {
		t.Fatalf("answer %q: %v", answer.Body, err)
	}
	if want := []string{"198.51.100.7:2222", "agent.example:2222"}; !slices.Equal(a.Direct, want) {
		t.Errorf("addresses %q, want %q", a.Direct, want)
	}
	if want := strings.TrimSpace(k); a.HostPublicKey != want || pub == nil {
		t.Errorf("host key %q, want the pinned %q", a.HostPublicKey, want)
	}
	if sessions := e.callerSessions(t); len(sessions) != 0 {
		t.Errorf("audit log %+v after an answer of addresses; want nothing (no session happened)", sessions)
	}
	if strings.Contains(logs.String(), "relay start") {
		t.Errorf("a relay started for an answer of addresses:\n%s", logs.String())
	}

	// A host without direct addresses is relayed at once, and audited.
	conn, answer, err = e.preferDirect(t, "plain", client)
	if err != nil || conn == nil {
		t.Fatalf("a host without direct addresses: answered %+v, %v; want a relay", answer, err)
	}
	echoRoundTrip(t, conn, 1000)
	if sessions := e.callerSessions(t); len(sessions) != 1 || sessions[0].HostID != "plain" || sessions[0].Kind != "ssh" {
		t.Errorf("audit log %+v; want the relay to plain", sessions)
	}

	// The relay's door first: a token that does not reach the host learns
	// nothing of its addresses.
	for _, tok := range []string{e.token(store.RoleClient, "other"), e.token(store.RoleAgent, "h"), "nope"} {
		_, answer, err := e.preferDirect(t, "h", tok)
		var he *bytestream.HandshakeError
		if answer != nil || !errors.As(err, &he) || he.StatusCode < 400 || strings.Contains(he.Body, "198.51.100.7") {
			t.Errorf("token %.12s…: answer %+v, %v; want the relay's refusal", tok, answer, err)
		}
	}
}

// TestDirectPreferOff: with direct sessions off, a caller that prefers the
// direct path is relayed, as by a gateway older than direct sessions.
func TestDirectPreferOff(t *testing.T) {
	e := newEnv(t, &Config{DirectOff: true})
	h := http.Header{}
	h.Set(wire.HeaderDirect, testDirectAddrs)
	_, k := newKey(t)
	if _, err := e.dialAgentHeader(e.token(store.RoleAgent, "h"), k, hostgate.Info{}, signerOf(k), h); err != nil {
		t.Fatal(err)
	}
	conn, answer, err := e.preferDirect(t, "h", e.token(store.RoleClient, "h"))
	if err != nil || conn == nil {
		t.Fatalf("direct sessions off: answered %+v, %v; want a relay", answer, err)
	}
	echoRoundTrip(t, conn, 1000)
}

// TestDirectPreferLongAnswerRelays: addresses whose answer would not fit
// in what a WebSocket client keeps of a refused upgrade's body
// (wire.MaxDirectAnswerLen) are not answered: the caller is relayed, as it
// would be after a cut answer it could not parse.
func TestDirectPreferLongAnswerRelays(t *testing.T) {
	e := newEnv(t, nil)
	label := strings.Repeat("a", 63)
	var long []string
	for i := range wire.MaxDirectAddrs {
		long = append(long, fmt.Sprintf("%s.%s.h%d.example:2222", label, label, i))
	}
	e.dialDirect(t, e.token(store.RoleAgent, "h"), strings.Join(long, ","))
	conn, answer, err := e.preferDirect(t, "h", e.token(store.RoleClient, "h"))
	if err != nil || conn == nil {
		t.Fatalf("an answer over %d bytes: answered %+v, %v; want a relay", wire.MaxDirectAnswerLen, answer, err)
	}
	echoRoundTrip(t, conn, 1000)
}

// TestDirectFailedLogged: a caller whose direct session just failed says
// why in its relay request (wire.HeaderDirectFailed, as the Go client and
// gateway proxy do); the gateway logs it, bounded, on the relay's start
// line and counts it, so that an operator sees who cannot reach the
// addresses an agent advertises. A relay without it logs no reason.
func TestDirectFailedLogged(t *testing.T) {
	e := newEnv(t, nil)
	var logs testenv.LogBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
	_, k := newKey(t)
	e.dialDirectKey(t, e.token(store.RoleAgent, "h"), k, testDirectAddrs)
	tok := e.token(store.RoleClient, "h")
	relay := func(why string) {
		t.Helper()
		h := http.Header{}
		h.Set("Authorization", "Bearer "+tok)
		if why != "" {
			h.Set(wire.HeaderDirectFailed, why)
		}
		c, _, err := bytestream.DialWebSocket(e.ctx, e.ts.URL+"/v1/hosts/h/ssh", &bytestream.WebSocketOptions{Header: h})
		if err != nil {
			t.Fatal(err)
		}
		echoRoundTrip(t, c, 100)
		_ = c.Close()
	}
	relay("")
	relay(wire.DirectFailedValue(errors.New("direct: no address answered: dial tcp 198.51.100.7:2222: i/o timeout")))
	relay(strings.Repeat("x", 5000))
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `msg="relay start"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 3 {
		t.Fatalf("%d relay start lines, want 3:\n%s", len(lines), logs.String())
	}
	if strings.Contains(lines[0], "directFailed") {
		t.Errorf("a relay whose caller said nothing logged a reason: %s", lines[0])
	}
	if !strings.Contains(lines[1], `directFailed="direct: no address answered: dial tcp 198.51.100.7:2222: i/o timeout"`) {
		t.Errorf("relay start line %s, want the caller's reason", lines[1])
	}
	if n := strings.Count(lines[2], "x"); n > wire.MaxDirectFailedLen || n < wire.MaxDirectFailedLen-8 {
		t.Errorf("a 5000-byte reason logged with %d of its bytes, want it cut to %d", n, wire.MaxDirectFailedLen)
	}
	if m := e.metricsText(); !strings.Contains(m, "hostgate_direct_fallbacks_total 2\n") {
		t.Errorf("metrics: want hostgate_direct_fallbacks_total 2:\n%s", m)
	}
}

// TestDirectExtraStreamsLoggedOnce: an agent that opens stream after
// stream on its tunnel once its control stream has ended has each closed,
// and the gateway's warning of it is logged once per tunnel, as the mux's
// own misuse warnings are: it was logged for every stream, so an agent
// opening and closing streams in a loop (a 12-byte frame each) wrote the
// gateway's log as fast as it sent them.
func TestDirectExtraStreamsLoggedOnce(t *testing.T) {
	e := newEnv(t, nil)
	var logs testenv.LogBuffer
	e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
	a := e.dialDirect(t, e.token(store.RoleAgent, "h"), testDirectAddrs)
	if m := a.ask(t, 1, e.tokenOf(e.token(store.RoleAdmin)).ID); m.Op != wire.DirectAdmit {
		t.Fatalf("%+v", m)
	}
	_ = a.ctl.Close()
	waitFor(t, "the ended control stream's session forgotten", func() bool {
		return strings.Contains(logs.String(), `msg="direct end"`)
	})
	const extra = 5
	for range extra {
		var st net.Conn
		var err error
		// The control stream's slot comes back once both of its ends
		// have closed.
		waitFor(t, "a stream opened", func() bool {
			st, err = a.sess.OpenStream()
			if err != nil {
				return false
			}
			_ = st.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err = io.ReadAll(st); err != nil {
				_ = st.Close()
				return false
			}
			return true
		})
		_ = st.Close()
	}
	if n := strings.Count(logs.String(), "agent opened another stream on its tunnel"); n != 1 {
		t.Errorf("%d streams after the control stream logged %d times, want once per tunnel", extra, n)
	}
	if !e.srv.tunnels.Connected("h") {
		t.Error("the tunnel ended")
	}
}

// TestDirectAskAbsentHost: asking only for the direct path to a host that
// is not enrolled, or whose execution ended for good, is answered as the
// relay answers it, 404 or 410, not 204 ("no addresses, use the relay"),
// which had gateway proxy --fdpass say so and start a relay of its own
// only for that one to fail.
func TestDirectAskAbsentHost(t *testing.T) {
	e, _, _, _ := directAndPlainHosts(t)
	e.srv.SetHostEnded(func(_ context.Context, id string) (string, time.Time) {
		if id == "ended" {
			return "terminated", time.Unix(1e9, 0)
		}
		return "", time.Time{}
	})
	admin := e.token(store.RoleAdmin)
	for id, want := range map[string]int{"nosuch": http.StatusNotFound, "ended": http.StatusGone} {
		_, relayErr := e.relay(id, admin)
		var rhe *bytestream.HandshakeError
		if !errors.As(relayErr, &rhe) || rhe.StatusCode != want {
			t.Fatalf("host %s: the relay answered %v, want %d", id, relayErr, want)
		}
		_, answer, err := e.directRequest(t, id, admin, wire.DirectAsk)
		var he *bytestream.HandshakeError
		if answer != nil || !errors.As(err, &he) || he.StatusCode != want {
			t.Errorf("host %s, asked for direct addresses: answer %+v, %v; want %d as the relay answers", id, answer, err, want)
		}
	}
}
