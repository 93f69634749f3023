package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/testenv"
	"github.com/hostgate/hostgate/internal/yamux"
)

// dialRawAgent connects as host id's agent and returns the agent's side
// of the tunnel's yamux session, without serving it: the test plays a
// hostile agent.
func (e *env) dialRawAgent(id string, cfg *bytestream.MuxConfig) *yamux.Session {
	e.t.Helper()
	_, k := newKey(e.t)
	e.pin(id, k) // proven before: the test's streams are all its own
	h := http.Header{}
	h.Set("Authorization", "Bearer "+e.token(store.RoleAgent, id))
	h.Set(wire.HeaderHostKey, k)
	h.Set(wire.HeaderInfo, wire.EncodeInfo(hostgate.Info{}))
	conn, _, err := bytestream.DialWebSocket(e.ctx, e.ts.URL+wire.ConnectPath, &bytestream.WebSocketOptions{Header: h})
	if err != nil {
		e.t.Fatal(err)
	}
	sess, err := bytestream.MuxServer(conn, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = sess.Close() })
	return sess
}

// tunnelSession is the gateway's side of host id's tunnel.
func (e *env) tunnelSession(id string) *yamux.Session {
	e.t.Helper()
	e.srv.tunnels.mu.Lock()
	en := e.srv.tunnels.tunnels[id]
	e.srv.tunnels.mu.Unlock()
	if en == nil {
		e.t.Fatalf("no tunnel for %s", id)
	}
	pt := en.t.(*pendingTunnel)
	<-pt.ready
	return pt.t.(muxTunnel).s
}

// TestClosedStreamsHoldNothing: an agent that fills every stream's window
// and never closes its side cannot make the gateway hold the streams its
// callers closed. With yamux's half-close, each closed stream kept its 4
// MiB window of bytes for 5 minutes while its slot was given back (100
// sessions opened and closed: 812 MiB of gateway heap, without bound), and
// the relay's goroutines waited on it as long.
func TestClosedStreamsHoldNothing(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	agent := e.dialRawAgent("h", &bytestream.MuxConfig{MaxStreams: -1, AcceptBacklog: 64})
	chunk := make([]byte, 4<<20)
	go func() {
		for {
			st, err := agent.AcceptStream()
			if err != nil {
				return
			}
			go func() { _, _ = st.Write(chunk) }() // never reads, never closes
		}
	}()
	gw := e.tunnelSession("h")
	const sessions = 8
	for i := range sessions {
		c, err := e.relay("h", admin)
		if err != nil {
			t.Fatal(i, err)
		}
		if _, err := c.Read(make([]byte, 1)); err != nil {
			t.Fatal(i, err)
		}
		_ = c.Close()
	}
	streams, relays := -1, ""
	for range 200 {
		streams, relays = gw.NumStreams(), metricLine(e.metricsText(), "hostgate_streams_open ")
		if streams == 0 && relays == "hostgate_streams_open 0" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if streams != 0 || relays != "hostgate_streams_open 0" {
		t.Fatalf("after %d sessions closed by their callers, the tunnel holds %d streams (%s)", sessions, streams, relays)
	}
	if gw.IsClosed() {
		t.Fatal("tunnel closed")
	}
}

func metricLine(text, prefix string) string {
	for l := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestUnacknowledgedOpenBlocksNoOther: a stream the agent has not
// acknowledged yet does not hold up the next one. The tunnel's yamux
// allowed one unacknowledged open at a time (its SYN bound was the accept
// backlog, 1 on a tunnel): opens to a host went one per round trip to its
// agent, and behind one the agent never acknowledged, every Open waited,
// whatever its ctx, for the 75 s StreamOpenTimeout that then ended the
// tunnel.
func TestUnacknowledgedOpenBlocksNoOther(t *testing.T) {
	e := newEnv(t, nil)
	// An agent that never accepts a stream, so never acknowledges one.
	_ = e.dialRawAgent("h", &bytestream.MuxConfig{MaxStreams: -1, AcceptBacklog: 64})
	const opens = 4
	done := make(chan error, opens)
	for range opens {
		go func() {
			c, err := e.srv.tunnels.Open(e.ctx, "h")
			if err == nil {
				t.Cleanup(func() { _ = c.Close() }) // open until the end
			}
			done <- err
		}()
	}
	for i := range opens {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("open %d of %d still waits on the unacknowledged ones", i+1, opens)
		}
	}
	if e.tunnelSession("h").IsClosed() {
		t.Fatal("tunnel closed")
	}
}

// TestReplacedTunnelSaysSo: when a second agent with the same host id,
// token and key connects, its connection wins; the agent it replaced and
// the callers on the old tunnel are told so. Both saw only a plain close:
// two agents taking turns each logged "tunnel closed by the gateway", and
// a caller was told the host's agent had disconnected while the host was
// back at once on the newer connection.
func TestReplacedTunnelSaysSo(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	tok := e.token(store.RoleAgent, "h")
	_, key := newKey(t)
	first, err := e.dialAgent(tok, key, hostgate.Info{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.relay("h", admin)
	if err != nil {
		t.Fatal(err)
	}
	echoRoundTrip(t, c, 1024)
	if _, err := e.dialAgent(tok, key, hostgate.Info{}); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, first.sess.CloseChan(), "the replaced tunnel")
	_, err = first.sess.AcceptStream()
	var ce *bytestream.CloseError
	if !errors.As(err, &ce) || ce.Code != wire.CloseReplaced || !strings.Contains(ce.Reason, "host h: replaced by a newer connection for this host from 127.0.0.1") {
		t.Errorf("the replaced agent's tunnel ended with %v, want close status %d saying it was replaced and from where", err, wire.CloseReplaced)
	}
	_, err = io.ReadFull(c, make([]byte, 1))
	if !errors.As(err, &ce) || ce.Reason != "host h: its agent reconnected, ending this session's tunnel; connect again" {
		t.Errorf("the caller on the replaced tunnel read %v, want to be told the agent reconnected", err)
	}
	c, err = e.relay("h", admin)
	if err != nil {
		t.Fatal(err)
	}
	echoRoundTrip(t, c, 1024)
}

// TestReplacedBeforeUpgradeSaysSo: a tunnel replaced in the moment
// between its registration (before the upgrade answers, for a pinned
// key) and its handler taking its WebSocket still tells its agent it was
// replaced: it was closed plainly, and the agent took the host back at
// once instead of standing by.
func TestReplacedBeforeUpgradeSaysSo(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token(store.RoleAgent, "h")
	_, key := newKey(t)
	e.pin("h", key)
	finish := e.dialHeld(func() (*fakeAgent, error) { return e.dialAgent(tok, key, hostgate.Info{}) })
	second, err := e.dialAgent(tok, key, hostgate.Info{})
	if err != nil {
		t.Fatal(err)
	}
	defer second.close()
	r := finish()
	if r.err != nil {
		t.Fatalf("the replaced agent's dial: %v", r.err)
	}
	defer r.a.close()
	waitClosed(t, r.a.sess.CloseChan(), "the replaced tunnel")
	_, err = r.a.sess.AcceptStream()
	var ce *bytestream.CloseError
	if !errors.As(err, &ce) || ce.Code != wire.CloseReplaced || !strings.Contains(ce.Reason, "replaced by a newer connection for this host") {
		t.Errorf("the tunnel replaced before its upgrade answered ended with %v, want close status %d saying it was replaced", err, wire.CloseReplaced)
	}
}

// TestEndedHostSaysSo: when a host's tunnel ends because the host ended
// for good (SetHostEnded answers: an execution terminated or out of its
// runtime), the callers on it are told that, with the reason, not that
// its agent disconnected, which reads as a host that comes back; a host
// that did not end is still said to have lost its agent.
func TestEndedHostSaysSo(t *testing.T) {
	e := newEnv(t, nil)
	admin := e.token(store.RoleAdmin)
	endedAt := time.Date(2026, 12, 3, 19, 4, 44, 512000000, time.FixedZone("CET", 3600))
	e.srv.SetHostEnded(func(_ context.Context, id string) (string, time.Time) {
		if id == "ended" || id == "forgotten" || id == "ending" {
			return "runtime", endedAt
		}
		return "", time.Time{}
	})
	// An ended execution's host, asked for by any of its routes (its
	// record, a certificate, a session), answers as the executions API
	// answers the execution: 410 gone with the reason and endedAt, and in
	// words that it ended, why, and what to do. It answered 404
	// not_found, which told it from a host that never was only in words.
	// Its record goes with it (forgotten); until its agent is forgotten
	// it keeps it, offline (ending), and is not coming back either.
	_, key := newKey(t)
	if _, err := e.store.Enroll(e.ctx, store.Enrollment{HostID: "ending", Kind: store.KindDocker, HostKey: key}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"forgotten", "ending"} {
		for _, c := range []struct{ method, path string }{
			{"GET", "/v1/hosts/" + id},
			{"POST", "/v1/hosts/" + id + "/certificates"},
			{"GET", "/v1/hosts/" + id + "/ssh"},
		} {
			req, _ := http.NewRequestWithContext(e.ctx, c.method, e.ts.URL+c.path, nil)
			if c.method == "POST" {
				_, pub := newKey(t)
				b, _ := json.Marshal(map[string]string{"publicKey": pub})
				req, _ = http.NewRequestWithContext(e.ctx, c.method, e.ts.URL+c.path, bytes.NewReader(b))
			}
			if strings.HasSuffix(c.path, "/ssh") {
				wsHeaders(req.Header)
			}
			req.Header.Set("Authorization", "Bearer "+admin)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			var body wire.ErrorBody
			_ = json.Unmarshal(b, &body)
			want := wire.Error{Code: "gone", Message: "host " + id + ": its execution ended (reason runtime): provision a new one",
				Reason: "runtime", EndedAt: "2026-12-03T18:04:44.512Z"}
			if res.StatusCode != http.StatusGone || body.Error != want {
				t.Errorf("%s %s of an ended execution: %d %s, want 410 %+v", c.method, c.path, res.StatusCode, b, want)
			}
		}
	}
	// The previews' words (OfflineReason) are the API's.
	for id, want := range map[string]string{"forgotten": "its execution ended (reason runtime)", "ending": "its execution ended (reason runtime)", "never": ""} {
		if ended, why := e.srv.OfflineReason(id); ended != (want != "") || why != want {
			t.Errorf("OfflineReason(%s) = %v %q, want %q", id, ended, why, want)
		}
	}
	if res, b := e.raw("GET", "/v1/hosts/never", admin, nil); res.StatusCode != http.StatusNotFound || !strings.Contains(string(b), `"message":"no such host: `) {
		t.Errorf("GET of a host that never was: %d %s, want 404 no such host", res.StatusCode, b)
	}
	// A token that does not reach the host learns nothing of its end.
	if res, b := e.raw("GET", "/v1/hosts/forgotten", e.token(store.RoleClient, "other"), nil); res.StatusCode != http.StatusNotFound || strings.Contains(string(b), "ended") {
		t.Errorf("GET of an ended host by a token for another: %d %s, want 404 saying nothing of its end", res.StatusCode, b)
	}
	for id, want := range map[string]string{
		"ended": "host ended: its execution ended (reason runtime): provision a new one",
		"lost":  "host lost: its agent disconnected from the gateway",
	} {
		_, key := newKey(t)
		a, err := e.dialAgent(e.token(store.RoleAgent, id), key, hostgate.Info{})
		if err != nil {
			t.Fatal(err)
		}
		c, err := e.relay(id, admin)
		if err != nil {
			t.Fatal(err)
		}
		echoRoundTrip(t, c, 1024)
		_ = a.sess.Close()
		_, err = io.ReadFull(c, make([]byte, 1))
		var ce *bytestream.CloseError
		if !errors.As(err, &ce) || ce.Reason != want {
			t.Errorf("host %s: the caller read %v, want %q", id, err, want)
		}
		_ = c.Close()
	}
}

// TestStoppingGatewayTellsAgents: a gateway that stops tells each agent
// so, which then logs that rather than that its tunnel closed.
func TestStoppingGatewayTellsAgents(t *testing.T) {
	e := newEnv(t, nil)
	_, key := newKey(t)
	a, err := e.dialAgent(e.token(store.RoleAgent, "h"), key, hostgate.Info{})
	if err != nil {
		t.Fatal(err)
	}
	_ = e.srv.Close()
	waitClosed(t, a.sess.CloseChan(), "the stopped gateway's tunnel")
	_, err = a.sess.AcceptStream()
	var ce *bytestream.CloseError
	if !errors.As(err, &ce) || ce.Code != bytestream.StatusServiceRestart || ce.Reason != "host h: the gateway is shutting down" {
		t.Errorf("the agent's tunnel ended with %v, want the gateway's word that it is shutting down", err)
	}
}

// TestAgentCannotClaimSandboxKind: an agent's info may not say kind
// "docker", the kind of the gateway's own sandboxes. The holder of a
// machine's agent token alone (no host key: the pinned key is public,
// and a pinned key is taken without proof before the upgrade) turned the
// machine into a "docker" host, which the next gateway start forgot as an
// ended execution, pinned key and all, so that the token's holder could
// then pin a key of its own (found by the hostile33 audit).
func TestAgentCannotClaimSandboxKind(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token(store.RoleAgent, "h1")
	_, key := newKey(t)
	a, err := e.dialAgent(tok, key, hostgate.Info{Kind: "machine", OS: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	a.close()

	// upgrade asks for the tunnel with a pinned key it does not hold,
	// and says whether the gateway went on to the upgrade.
	upgrade := func(info hostgate.Info) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(e.ctx, "GET", e.ts.URL+wire.ConnectPath, nil)
		wsHeaders(req.Header)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set(wire.HeaderHostKey, key)
		req.Header.Set(wire.HeaderInfo, wire.EncodeInfo(info))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode == http.StatusSwitchingProtocols {
			return res.StatusCode, ""
		}
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	status, body := upgrade(hostgate.Info{Kind: store.KindDocker, OS: "linux"})
	if status != http.StatusBadRequest || !strings.Contains(body, `kind \"docker\"`) {
		t.Errorf("an agent claiming kind docker got %d %s, want 400 naming the kind", status, body)
	}
	h, err := e.store.Host(e.ctx, "h1")
	if err != nil || h.Kind != "machine" {
		t.Fatalf("after a claim of kind docker the host is %q (%v), want machine still", h.Kind, err)
	}

	// A host never seen is not enrolled as one either.
	tok2 := e.token(store.RoleAgent, "h2")
	signer2, key2 := newKey(t)
	if _, err := e.dialAgentSigner(tok2, key2, hostgate.Info{Kind: store.KindDocker}, signer2); err == nil {
		t.Error("a new host's agent claiming kind docker was enrolled")
	}
	if h, err := e.store.Host(e.ctx, "h2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after a claim of kind docker, host h2 is %+v (%v), want none", h, err)
	}
}

// TestUnprovenAgentStoresNoInfo: a request that names the host's pinned
// key without showing it holds it (no key signature) gets its tunnel, as
// before, but what it says of the host (kind, OS, home, workspace) is not
// stored: the pinned key is public, and the holder of the agent token
// alone rewrote the info /v1/hosts publishes and callers read (found by
// the hostile33 audit). An agent that signs updates it.
func TestUnprovenAgentStoresNoInfo(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token(store.RoleAgent, "h1")
	signer, key := newKey(t)
	first := hostgate.Info{Kind: "machine", OS: "linux", Home: "/home/build", Workspace: "/home/build"}
	a, err := e.dialAgent(tok, key, first)
	if err != nil {
		t.Fatal(err)
	}
	a.close()
	info := func() hostgate.Info {
		t.Helper()
		h, err := e.store.Host(e.ctx, "h1")
		if err != nil {
			t.Fatal(err)
		}
		var i hostgate.Info
		if err := json.Unmarshal(h.Info, &i); err != nil {
			t.Fatal(err)
		}
		i.Kind = h.Kind
		return i
	}

	forged := hostgate.Info{Kind: "local", OS: "windows", Home: `C:\evil`, Workspace: "/etc"}
	a, err = e.dialAgentSigner(tok, key, forged, nil) // no signer: it cannot sign
	if err != nil {
		t.Fatal(err)
	}
	a.close()
	if got := info(); got != first {
		t.Errorf("an agent that did not show it holds the pinned key stored %+v, want %+v kept", got, first)
	}

	sig, err := wire.SignKey(signer, tok, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	next := hostgate.Info{Kind: "machine", OS: "linux", Home: "/home/ci", Workspace: "/srv/ci"}
	a, err = e.dialAgentHeader(tok, key, next, signer, http.Header{wire.HeaderKeySignature: {sig}})
	if err != nil {
		t.Fatal(err)
	}
	a.close()
	if got := info(); got != next {
		t.Errorf("a signing agent's info was stored as %+v, want %+v", got, next)
	}
}

// TestUnsignedAgentDoesNotTakeOverSignedTunnel: the holder of a host's
// agent token alone (no host key; the pinned key is public) took the
// host's tunnel from its agent by naming the pinned key, and the agent
// then stood by, logging that another agent with its host key served
// the host, for as long as the token's holder kept its tunnel (found by
// the hostile33 audit against a real agent: a curl upgrade did it). Now
// an unsigned connection is answered 409 host_served while a signed
// agent serves; a signed standby agent takes the host back from an
// unsigned one.
func TestUnsignedAgentDoesNotTakeOverSignedTunnel(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token(store.RoleAgent, "h1")
	signer, key := newKey(t)
	info := hostgate.Info{Kind: "machine"}
	signedHeader := func(extra ...string) http.Header {
		t.Helper()
		sig, err := wire.SignKey(signer, tok, "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{wire.HeaderKeySignature: {sig}}
		for i := 0; i+1 < len(extra); i += 2 {
			h.Set(extra[i], extra[i+1])
		}
		return h
	}
	if _, err := e.dialAgentHeader(tok, key, info, signer, signedHeader()); err != nil {
		t.Fatal(err)
	}
	serving := e.srv.tunnels.tunnel("h1")

	_, err := e.dialAgentSigner(tok, key, info, nil)
	var he *bytestream.HandshakeError
	if err == nil || !errors.As(err, &he) || he.StatusCode != http.StatusConflict || !strings.Contains(he.Body, wire.CodeHostServed) {
		t.Errorf("an unsigned connection naming the pinned key, while a signed agent serves: %v, want 409 %s", err, wire.CodeHostServed)
	}
	if got := e.srv.tunnels.tunnel("h1"); got != serving {
		t.Fatal("an unsigned connection replaced the signed agent's tunnel")
	}

	// While only an unsigned one serves, a signed standby agent takes
	// the host back.
	e.srv.tunnels.tunnel("h1").(*pendingTunnel).signed.Store(false)
	if _, err := e.dialAgentHeader(tok, key, info, signer, signedHeader(wire.HeaderStandby, wire.StandbyOn)); err != nil {
		t.Fatalf("a signed standby agent, while an unsigned one serves: %v, want served", err)
	}
	if got := e.srv.tunnels.tunnel("h1"); got == serving {
		t.Fatal("the signed standby agent did not take the tunnel over from the unsigned one")
	}
}

// TestTunnelUpSaysWhetherKeyShown: the "tunnel up" line says whether the
// connection showed it holds the host key (keyShown): one that only named
// the pinned key, which anyone with the agent token can, was logged as
// the host's agent was (found by the hostile33 audit).
func TestTunnelUpSaysWhetherKeyShown(t *testing.T) {
	for _, signs := range []bool{false, true} {
		t.Run(strconv.FormatBool(signs), func(t *testing.T) {
			e := newEnv(t, nil)
			var logs testenv.LogBuffer
			e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
			tok := e.token(store.RoleAgent, "h")
			signer, key := newKey(t)
			e.pin("h", key)
			h := http.Header{}
			if signs {
				sig, err := wire.SignKey(signer, tok, "", time.Now())
				if err != nil {
					t.Fatal(err)
				}
				h.Set(wire.HeaderKeySignature, sig)
			}
			if _, err := e.dialAgentHeader(tok, key, hostgate.Info{Kind: "machine"}, signer, h); err != nil {
				t.Fatal(err)
			}
			line := waitLogLine(t, &logs, "tunnel up")
			if want := "keyShown=" + strconv.FormatBool(signs); !strings.Contains(line, want) {
				t.Errorf("tunnel up line:\n%s\nwant it to hold %s", line, want)
			}
		})
	}
}

// The tunnel up line names the agent's build, which an agent sends as its
// User-Agent: in a rolling upgrade the gateway's log said which hosts
// came back but not with which agent. A caller's own words are cut to a
// line's worth.
func TestTunnelUpNamesTheAgentBuild(t *testing.T) {
	for ua, want := range map[string]string{
		"hostgate-agent (3f1c2ab4d5e6 2026-12-02T06:40:00Z go1.26.0)": `userAgent="hostgate-agent (3f1c2ab4d5e6 2026-12-02T06:40:00Z go1.26.0)"`,
		strings.Repeat("x", 5000):                                     `userAgent=` + strings.Repeat("x", 200) + `…`,
	} {
		e := newEnv(t, nil)
		var logs testenv.LogBuffer
		e.srv.logger = slog.New(slog.NewTextHandler(&logs, nil))
		_, key := newKey(t)
		if _, err := e.dialAgentHeader(e.token(store.RoleAgent, "h"), key, hostgate.Info{Kind: "machine"}, signerOf(key), http.Header{"User-Agent": {ua}}); err != nil {
			t.Fatal(err)
		}
		if line := waitLogLine(t, &logs, "tunnel up"); !strings.HasSuffix(line, want) {
			t.Errorf("tunnel up line:\n%s\nwant it to end with %s", line, want)
		}
	}
}
