package gateway

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/internal/textcut"
	"github.com/hostgate/hostgate/metrics"
)

// maxBody bounds JSON request bodies; the largest legitimate one is an
// RSA public key.
const maxBody = 64 << 10

// HostRecord is what the API publishes about a host.
type HostRecord struct {
	ID            string          `json:"id"`
	Kind          string          `json:"kind"`
	Info          json.RawMessage `json:"info"`
	HostKey       string          `json:"hostKey"`       // "SHA256:…", as ssh-keygen -lf prints it
	HostPublicKey string          `json:"hostPublicKey"` // "ssh-ed25519 AAAA…"
	Connected     bool            `json:"connected"`
	// AgentVersion is the build the connected agent says it is (its
	// User-Agent: commit, commit time, Go version), for a host whose
	// agent dialed in and is connected now; empty otherwise.
	AgentVersion string `json:"agentVersion,omitempty"`
	// LastSeen is when the gateway last saw the host: now while it is
	// connected, when its tunnel ended, or (across a restart of the
	// gateway) its last connect.
	LastSeen *time.Time `json:"lastSeen,omitempty"`
	// Direct is the addresses ("host:port") of the direct listener of
	// the agent connected now, which a caller dials first, straight to the
	// agent, before the relay (wire.HeaderDirect); empty when its agent
	// has none or the gateway's direct sessions are off.
	Direct []string `json:"direct,omitempty"`
}

func (s *Server) record(h store.Host) HostRecord {
	rec := HostRecord{ID: h.ID, Kind: h.Kind, Info: h.Info, HostPublicKey: h.HostKey, Connected: s.route.Connected(h.ID)}
	if len(rec.Info) == 0 {
		rec.Info = json.RawMessage("{}")
	}
	if pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(h.HostKey)); err == nil {
		rec.HostKey = ssh.FingerprintSHA256(pub)
	}
	if pt, ok := s.tunnels.tunnel(h.ID).(*pendingTunnel); ok && rec.Connected {
		rec.AgentVersion = pt.agent
		rec.Direct = pt.direct // set only while direct sessions are on
	}
	// The store's is the last connect: a host connected for a week and
	// gone an hour read a week old. What this gateway saw wins.
	seen := h.LastSeen
	if t := s.tunnels.LastSeen(h.ID); t.After(seen) {
		seen = t
	}
	if !seen.IsZero() {
		t := seen.UTC()
		rec.LastSeen = &t
	}
	return rec
}

// caller authenticates a request for host id as a caller (admin, or a
// client token naming id). Everything a token may not reach is 404, so a
// client cannot probe which hosts exist; an agent token is 403.
func (s *Server) caller(w http.ResponseWriter, r *http.Request) (store.Token, string, bool) {
	tok, ok := s.authenticate(w, r)
	if !ok {
		return tok, "", false
	}
	id := r.PathValue("id")
	if tok.Role == store.RoleAgent {
		s.forbid(w, "agent tokens cannot reach hosts: this is the token an agent connects with; use a client token for the host (`gateway token create --role client --host ID`) or an admin token")
		return tok, "", false
	}
	if !store.ValidHostID(id) {
		WriteError(w, http.StatusNotFound, "not_found", noSuchHost)
		return tok, "", false
	}
	if !tok.Allows(id) {
		s.metrics.AuthFailures.WithLabelValues(metrics.ReasonForbidden).Inc()
		// The same answer whether id exists or not, so nothing is probed;
		// it says why, since a client token's holder knows its own hosts.
		WriteError(w, http.StatusNotFound, "not_found", wire.HostMessage(id, "not among the hosts this token reaches: a client token reaches only the hosts it was created with (gateway token create --role client --host ID)"))
		return tok, "", false
	}
	return tok, id, true
}

func (s *Server) me(w http.ResponseWriter, r *http.Request) {
	tok, err := s.Authenticate(r)
	s.mu.Lock()
	extra := s.meFields
	s.mu.Unlock()
	if err != nil {
		// The terminal page asks this after its socket failed.
		s.refuseRequest(w, r, err)
		return
	}
	out := map[string]any{}
	if extra != nil {
		for k, v := range extra(r, tok) {
			out[k] = v
		}
	}
	out["name"], out["role"], out["hosts"] = tok.Name, tok.Role, tok.Hosts
	WriteJSON(w, http.StatusOK, out)
}

func (s *Server) listHosts(w http.ResponseWriter, r *http.Request) {
	tok, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	if tok.Role == store.RoleAgent {
		s.forbid(w, "agent tokens cannot list hosts")
		return
	}
	hosts, err := s.store.Hosts(r.Context())
	if err != nil {
		s.storeError(w, err, s.storeReads)
		return
	}
	s.storeReads.answered(s.logger)
	out := make([]HostRecord, 0, len(hosts))
	for _, h := range hosts {
		if tok.Allows(h.ID) {
			out = append(out, s.record(h))
		}
	}
	WriteJSON(w, http.StatusOK, map[string]any{"hosts": out})
}

func (s *Server) getHost(w http.ResponseWriter, r *http.Request) {
	_, id, ok := s.caller(w, r)
	if !ok {
		return
	}
	h, ok := s.knownHost(w, r, id)
	if !ok {
		return
	}
	WriteJSON(w, http.StatusOK, s.record(h))
}

// knownHost reads the record of host id, which a request is about, and
// reports whether the request may go on; when not, it has answered: 404,
// or 410 for an ended execution, when there is no record (hostNotFound);
// 410 for an ended execution whose record is still there (endedOffline);
// the store's failure.
func (s *Server) knownHost(w http.ResponseWriter, r *http.Request, id string) (store.Host, bool) {
	h, err := s.store.Host(r.Context(), id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.storeError(w, err, s.storeReads)
		return store.Host{}, false
	}
	s.storeReads.answered(s.logger)
	if err != nil {
		s.hostNotFound(w, id)
		return store.Host{}, false
	}
	if s.endedOffline(w, h) {
		return store.Host{}, false
	}
	return h, true
}

type certRequest struct {
	PublicKey string `json:"publicKey"`
}

type certResponse struct {
	Certificate string    `json:"certificate"` // authorized_keys form
	ValidBefore time.Time `json:"validBefore"`
	HostKey     string    `json:"hostKey"`
	// HostPublicKey is the pinned key itself, as GET /v1/hosts/{id} has
	// it: `gateway cert` writes it to known_hosts without a second call.
	HostPublicKey string `json:"hostPublicKey"`
	// Direct is HostRecord's: the agent's direct listener, which the
	// certificate also opens a session on.
	Direct []string `json:"direct,omitempty"`
}

func (s *Server) certificate(w http.ResponseWriter, r *http.Request) {
	tok, id, ok := s.caller(w, r)
	if !ok {
		return
	}
	var req certRequest
	if !decodeBody(w, r, &req) {
		return
	}
	pub, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(req.PublicKey))
	if err != nil || strings.TrimSpace(string(rest)) != "" {
		WriteError(w, http.StatusBadRequest, "bad_request", "publicKey: want one public key in authorized_keys form")
		return
	}
	if msg := weakKey(pub); msg != "" {
		WriteError(w, http.StatusBadRequest, "bad_request", "publicKey: "+msg)
		return
	}
	h, ok := s.knownHost(w, r, id)
	if !ok {
		return
	}
	if h.HostKey == "" {
		WriteError(w, http.StatusConflict, "host_key_reset", wire.HostMessage(id, "no pinned host key (reset); wait for its agent to enroll again"))
		return
	}
	// No longer than the token: an agent's --trusted-ca listener checks
	// the certificate alone, so one that outlived its token let the
	// holder of an expired token in for the rest of --cert-ttl.
	ttl := s.cfg.CertTTL
	if !tok.ExpiresAt.IsZero() {
		left := time.Until(tok.ExpiresAt)
		if left <= 0 {
			s.metrics.AuthFailures.WithLabelValues(metrics.ReasonExpired).Inc()
			s.refuse(w, &authError{status: http.StatusUnauthorized, code: "unauthorized", msg: "token expired: ask the gateway's admin for a new one (gateway token create)", reason: metrics.ReasonExpired})
			return
		}
		ttl = min(ttl, left)
	}
	cert, err := s.ca.SignToken(pub, id, tok.Name, tok.ID, ttl, s.forwardsAgent(h))
	if err != nil {
		s.logger.Error("sign certificate", "host", id, "err", err)
		WriteError(w, http.StatusInternalServerError, "internal", "could not sign the certificate")
		return
	}
	s.audit(r, tok, id, "certificate")
	rec := s.record(h)
	WriteJSON(w, http.StatusOK, certResponse{
		Certificate:   strings.TrimSpace(string(ssh.MarshalAuthorizedKey(cert))),
		ValidBefore:   time.Unix(int64(cert.ValidBefore), 0).UTC(),
		HostKey:       rec.HostKey,
		HostPublicKey: h.HostKey,
		Direct:        rec.Direct,
	})
}

// forwardsAgent says whether host h's agent forwards a caller's SSH agent
// (ssh -A), which its certificates then permit: a sandbox's never does,
// nor a machine's whose registered tunnel said it was started with
// --no-agent-forwarding (wire.HeaderAgentForwarding), which is asked of
// the tunnel itself, so that the one a newer connection replaced has no
// say. While no tunnel serves it (offline, or after a gateway restart) a
// machine's is taken to forward one; the agent refuses regardless.
func (s *Server) forwardsAgent(h store.Host) bool {
	if h.Kind == store.KindDocker {
		return false
	}
	pt, ok := s.tunnels.tunnel(h.ID).(*pendingTunnel)
	return !ok || !pt.noAgentFwd
}

// weakKey refuses key types no agent should accept.
func weakKey(pub ssh.PublicKey) string {
	switch pub.Type() {
	case ssh.KeyAlgoED25519, ssh.KeyAlgoECDSA256, ssh.KeyAlgoECDSA384, ssh.KeyAlgoECDSA521,
		ssh.KeyAlgoSKED25519, ssh.KeyAlgoSKECDSA256:
		return ""
	case ssh.KeyAlgoRSA:
		// The modulus' bits: Size counts whole bytes, which took a key
		// of 2041 to 2047 bits for 2048.
		if cp, ok := pub.(ssh.CryptoPublicKey); ok {
			if k, ok := cp.CryptoPublicKey().(*rsa.PublicKey); ok && k.N.BitLen() >= 2048 {
				return ""
			}
		}
		return "RSA keys must have at least 2048 bits"
	default:
		return "key type " + pub.Type() + " is not accepted"
	}
}

// audit records a session start; a store failure does not stop the
// session (see auditLog).
func (s *Server) audit(r *http.Request, tok store.Token, hostID, kind string) {
	s.metrics.SessionStarts.WithLabelValues(kind).Inc()
	s.recordAudit(r.Context(), store.Session{TokenName: tok.Name, HostID: hostID, Kind: kind, RemoteAddr: s.remote(r)})
}

// storeFailures logs the store's failures of what (its reads, say), which
// fail who (the routes that make them) with 503 while they last. Reads
// and writes are apart: a full disk fails writes while reads go through,
// and a read that went through must not end, and so log anew, an outage
// of writes at each request.
func storeFailures(what, who string) *outageLog {
	return &outageLog{every: lookupFailureReminder, level: slog.LevelError,
		begin: "store: the state store fails " + what + "; " + who + " are answered 503 store_unavailable until it answers (logged again when its error changes, else every " + lookupFailureReminder.String() + ")",
		end:   "store: the state store answers " + what + " again"}
}

// storeError answers a store call's failure err, noting it in the
// outage log of that kind of call, which its successes end (answered).
func (s *Server) storeError(w http.ResponseWriter, err error, l *outageLog) {
	if errors.Is(err, store.ErrNotFound) {
		WriteError(w, http.StatusNotFound, "not_found", noSuchHost)
		return
	}
	if errors.Is(context.Cause(s.ctx), ErrShuttingDown) && errors.Is(err, context.Canceled) {
		// The shutdown cut the call (a request's ctx is the gateway's).
		WriteError(w, http.StatusServiceUnavailable, "shutting_down", "gateway is shutting down")
		return
	}
	l.failed(s.logger, err, time.Now())
	WriteError(w, http.StatusServiceUnavailable, "store_unavailable", "state store unavailable")
}

// EncodedBody reports a request whose body is sent with a
// Content-Encoding (gzip, say), and the message to answer it with: the
// API reads bodies as sent, and a gzipped one failed as "invalid
// character '\x1f'", which does not say what to change.
func EncodedBody(r *http.Request) (string, bool) {
	for _, v := range r.Header.Values("Content-Encoding") {
		for e := range strings.SplitSeq(v, ",") {
			if e = strings.TrimSpace(e); e != "" && !strings.EqualFold(e, "identity") {
				return fmt.Sprintf("Content-Encoding %q: the API takes JSON bodies uncompressed; send the body without Content-Encoding", textcut.Cut(e, 64)), true
			}
		}
	}
	return "", false
}

// decodeBody reads one bounded JSON object into v, answering 400/413 on
// failure.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	return decode(w, r, v, false)
}

// DecodeStrictBody is decodeBody that also refuses fields v does not
// have, for the routes the gateway's hooks add (shares).
func DecodeStrictBody(w http.ResponseWriter, r *http.Request, v any) bool {
	return decode(w, r, v, true)
}

func decode(w http.ResponseWriter, r *http.Request, v any, strict bool) bool {
	if msg, ok := EncodedBody(r); ok {
		WriteError(w, http.StatusBadRequest, "bad_request", msg)
		return false
	}
	// boundBodies has bounded the body's arrival.
	body, tap := TapBody(http.MaxBytesReader(w, r.Body, maxBody), v)
	body, check := CheckBody(body, v)
	dec := json.NewDecoder(body)
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			WriteError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body too large: the API takes JSON bodies of at most %d KiB, which every route's fields fit in; send only the JSON object the route takes", maxBody>>10))
			return false
		}
		WriteError(w, http.StatusBadRequest, "bad_request", BodyError(err, tap, v))
		return false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		WriteError(w, http.StatusBadRequest, "bad_request", "body: not valid JSON: trailing data after the JSON object")
		return false
	}
	if err := check(); err != nil {
		WriteError(w, http.StatusBadRequest, "bad_request", err.Error())
		return false
	}
	return true
}
