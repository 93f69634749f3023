// Package metrics declares hostgate's Prometheus collectors. Each set is
// registered on a registry its owner passes in, never the global default,
// so two gateways in one process (tests, `gateway dev`) do not collide.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Directions of relayed bytes.
const (
	ToHost   = "to_host"   // caller → agent
	FromHost = "from_host" // agent → caller
)

// Auth failure reasons.
const (
	ReasonMissing     = "missing"      // no credentials presented
	ReasonUnknown     = "unknown"      // token not found
	ReasonExpired     = "expired"      // token past expiry
	ReasonForbidden   = "forbidden"    // valid token, wrong role or host
	ReasonRateLimited = "rate_limited" // source over its failure budget
	ReasonKeyMismatch = "key_mismatch" // agent came back with another host key
)

// Tunnel connect results.
const (
	ConnectNew       = "new"       // first tunnel of a newly enrolled host
	ConnectReconnect = "reconnect" // a known host came back after its tunnel dropped
	ConnectReplaced  = "replaced"  // a connection replaced the host's live tunnel
	ConnectRefused   = "refused"   // enrollment refused (host key mismatch)
	ConnectStandby   = "standby"   // a standing-by agent asked while another agent's tunnel serves the host
)

// Agent refusal reasons: why the gateway turned an agent's tunnel away.
const (
	RefusedToken        = "token"          // its token was refused (auth_failures_total says why) or could not be checked
	RefusedForbidden    = "forbidden"      // not an agent token, or for another host
	RefusedKeyMismatch  = "key_mismatch"   // the host is pinned to another host key
	RefusedKeyUnproven  = "key_unproven"   // it did not prove it holds the key it presented
	RefusedKeyNotPinned = "key_not_pinned" // its proven key could not be pinned
)

// Causes of an agent tunnel's end (hostgate_tunnel_disconnects_total), as
// the gateway's "tunnel down" line says them in words.
const (
	DisconnectGatewayStopping = "gateway_stopping"  // this gateway shut down
	DisconnectTokenRevoked    = "token_revoked"     // the agent's token was revoked or expired
	DisconnectReplaced        = "replaced"          // a newer connection for the host took over
	DisconnectClosedByGateway = "closed_by_gateway" // this gateway closed it for another reason
	DisconnectAgentStopped    = "agent_stopped"     // the agent said it was stopping
	DisconnectAgentClosed     = "agent_closed"      // the agent closed it (a refusal of this gateway's CA, say)
	DisconnectUnresponsive    = "unresponsive"      // the agent stopped answering keepalives or reading
	DisconnectConnectionLost  = "connection_lost"   // the connection ended without a close: agent killed, proxy, network
	DisconnectFailed          = "failed"            // anything else
)

// Kinds of agent tunnel misuse: frames no well-behaved agent sends.
const (
	MisuseStreamRefused     = "stream_refused"      // a stream beyond the tunnel's limit (agents open one at most, direct sessions' control stream)
	MisuseEmptyWindowUpdate = "empty_window_update" // a window update that grants (almost) nothing
)

// Direct session admission results (hostgate_direct_admissions_total).
const (
	DirectAdmitted = "admitted" // the gateway admitted the direct connection its agent asked about
	DirectRefused  = "refused"  // refused: its token is gone or does not reach the host, the audit log, too many
)

// Gateway holds the gateway's collectors, declared together so the choke
// points they count are easy to review.
type Gateway struct {
	// TunnelsConnected is the number of live agent tunnels.
	TunnelsConnected prometheus.Gauge
	// TunnelConnects counts agent tunnel attempts by result: ConnectNew,
	// ConnectReconnect, ConnectReplaced, ConnectRefused, ConnectStandby.
	TunnelConnects *prometheus.CounterVec
	// StreamsOpen is the number of relayed streams open now.
	StreamsOpen prometheus.Gauge
	// BytesRelayed counts relayed bytes by direction (ToHost, FromHost).
	BytesRelayed *prometheus.CounterVec
	// SessionStarts counts sessions by kind ("ssh", "certificate", …).
	SessionStarts *prometheus.CounterVec
	// AuthFailures counts refused requests by reason.
	AuthFailures *prometheus.CounterVec
	// AgentRefusals counts agent tunnels turned away, by reason
	// (RefusedToken, RefusedKeyMismatch, …): the gateway logs a refused
	// host's agent once a spell, and this counts every attempt.
	AgentRefusals *prometheus.CounterVec
	// AgentMisuse counts frames of agents' tunnels that no well-behaved
	// agent sends, by kind (MisuseStreamRefused, …): the gateway logs
	// each kind once per tunnel.
	AgentMisuse *prometheus.CounterVec
	// TunnelDisconnects counts agent tunnels that ended, by cause
	// (DisconnectGatewayStopping, …): with TunnelConnects' reconnects, a
	// host that keeps dropping, and why.
	TunnelDisconnects *prometheus.CounterVec
	// AuditWriteFailures counts sessions whose audit entry the state
	// store refused (the session went on).
	AuditWriteFailures prometheus.Counter
	// AuditFailing is 1 while the audit log cannot be written.
	AuditFailing prometheus.Gauge
	// DirectOpen is the number of direct sessions (a caller's SSH
	// connection straight to an agent's listener) the gateway admitted
	// and their agents have not reported closed.
	DirectOpen prometheus.Gauge
	// DirectAdmissions counts agents' requests to admit a direct
	// session, by result (DirectAdmitted, DirectRefused).
	DirectAdmissions *prometheus.CounterVec
	// DirectFallbacks counts relayed sessions whose caller said its
	// direct session to the host had just failed (wire.HeaderDirectFailed).
	DirectFallbacks prometheus.Counter
}

// NewGateway creates the gateway collectors and registers them on reg.
func NewGateway(reg prometheus.Registerer) *Gateway {
	m := &Gateway{
		TunnelsConnected: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "hostgate", Name: "tunnels_connected", Help: "Live agent tunnels.",
		}),
		TunnelConnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hostgate", Name: "tunnel_connects_total", Help: "Agent tunnel connections by result (new, reconnect, replaced, refused, standby).",
		}, []string{"result"}),
		StreamsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "hostgate", Name: "streams_open", Help: "Relayed caller streams open now.",
		}),
		BytesRelayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hostgate", Name: "relayed_bytes_total", Help: "Bytes relayed between callers and hosts, by direction.",
		}, []string{"direction"}),
		SessionStarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hostgate", Name: "session_starts_total", Help: "Sessions started, by kind.",
		}, []string{"kind"}),
		AuthFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hostgate", Name: "auth_failures_total", Help: "Refused requests, by reason.",
		}, []string{"reason"}),
		AgentRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hostgate", Name: "agent_refusals_total", Help: "Agent tunnels refused, by reason (token, forbidden, key_mismatch, key_unproven, key_not_pinned).",
		}, []string{"reason"}),
		AgentMisuse: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hostgate", Name: "agent_misuse_total", Help: "Frames of agent tunnels no well-behaved agent sends, by kind (stream_refused, empty_window_update).",
		}, []string{"kind"}),
		TunnelDisconnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hostgate", Name: "tunnel_disconnects_total", Help: "Agent tunnels that ended, by cause (gateway_stopping, token_revoked, replaced, closed_by_gateway, agent_stopped, agent_closed, unresponsive, connection_lost, failed).",
		}, []string{"cause"}),
		AuditWriteFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "hostgate", Name: "audit_write_failures_total", Help: "Sessions the audit log could not record (the session went on).",
		}),
		AuditFailing: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "hostgate", Name: "audit_failing", Help: "1 while the audit log cannot be written, else 0.",
		}),
		DirectOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "hostgate", Name: "direct_sessions_open", Help: "Direct sessions (callers' SSH connections straight to an agent's listener) admitted and still open.",
		}),
		DirectAdmissions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "hostgate", Name: "direct_admissions_total", Help: "Direct sessions agents asked the gateway to admit, by result (admitted, refused).",
		}, []string{"result"}),
		DirectFallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "hostgate", Name: "direct_fallbacks_total", Help: "Relayed sessions whose caller said its direct session to the host had just failed (the reason is in the relay start log line).",
		}),
	}
	// Pre-create the label values so dashboards see zeros, not gaps.
	for _, d := range []string{ToHost, FromHost} {
		m.BytesRelayed.WithLabelValues(d)
	}
	for _, r := range []string{ReasonMissing, ReasonUnknown, ReasonExpired, ReasonForbidden, ReasonRateLimited, ReasonKeyMismatch} {
		m.AuthFailures.WithLabelValues(r)
	}
	for _, r := range []string{ConnectNew, ConnectReconnect, ConnectReplaced, ConnectRefused, ConnectStandby} {
		m.TunnelConnects.WithLabelValues(r)
	}
	for _, r := range []string{RefusedToken, RefusedForbidden, RefusedKeyMismatch, RefusedKeyUnproven, RefusedKeyNotPinned} {
		m.AgentRefusals.WithLabelValues(r)
	}
	for _, c := range []string{DisconnectGatewayStopping, DisconnectTokenRevoked, DisconnectReplaced, DisconnectClosedByGateway,
		DisconnectAgentStopped, DisconnectAgentClosed, DisconnectUnresponsive, DisconnectConnectionLost, DisconnectFailed} {
		m.TunnelDisconnects.WithLabelValues(c)
	}
	for _, k := range []string{MisuseStreamRefused, MisuseEmptyWindowUpdate} {
		m.AgentMisuse.WithLabelValues(k)
	}
	for _, r := range []string{DirectAdmitted, DirectRefused} {
		m.DirectAdmissions.WithLabelValues(r)
	}
	reg.MustRegister(m.TunnelsConnected, m.TunnelConnects, m.StreamsOpen, m.BytesRelayed, m.SessionStarts, m.AuthFailures, m.AgentRefusals, m.AgentMisuse, m.TunnelDisconnects, m.AuditWriteFailures, m.AuditFailing,
		m.DirectOpen, m.DirectAdmissions, m.DirectFallbacks)
	return m
}
