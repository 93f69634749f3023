// Package wire holds what the gateway and a dialing-out agent agree on for
// enrollment on GET /v1/agents/connect: header names, the Info encoding and
// the JSON error shape, and the host key signature; and how the gateway
// words a message about one host, which its clients take apart. It is tiny and needs
// nothing of the gateway, so the agent binary does not link the gateway.
package wire

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hostgate/hostgate"
)

// Enrollment headers.
const (
	// HeaderHostKey carries the agent's host public key in authorized_keys
	// form ("ssh-ed25519 AAAA…"), request.
	HeaderHostKey = "X-Hostgate-Host-Key"
	// HeaderInfo carries the agent's hostgate.Info as base64url (unpadded)
	// JSON, request.
	HeaderInfo = "X-Hostgate-Info"
	// HeaderHostID is the host id: optional in the request (must match the
	// token's host), always in the response.
	HeaderHostID = "X-Hostgate-Host-Id"
	// HeaderCAKey carries the gateway's user CA public key in
	// authorized_keys form, response.
	HeaderCAKey = "X-Hostgate-Ca-Key"
	// HeaderAgentForwarding, in the request, is AgentForwardingOff when
	// the agent refuses to forward a caller's SSH agent (agent
	// --no-agent-forwarding): the certificates the gateway issues for
	// the host then do not permit it. Absent, the agent forwards one.
	HeaderAgentForwarding = "X-Hostgate-Agent-Forwarding"
	// HeaderKeyProof, in the response, says the gateway has not pinned
	// the presented host key yet: it first runs an SSH key exchange on
	// the tunnel's first stream, which the agent's signature proves it
	// holds the key by, and closes that stream once the key is pinned
	// and the host routable (or the tunnel, when the proof fails). Its
	// value names the proof: KeyProofSSH.
	HeaderKeyProof = "X-Hostgate-Key-Proof"
	// HeaderStandby, in the request (StandbyOn), asks for a tunnel only
	// while the host has none: an agent whose tunnel another agent of its
	// host took over (CloseReplaced) stands by, asking now and then, and
	// serves the host when the other one's tunnel is gone, instead of
	// taking the tunnel back at once. A gateway that has a live tunnel for
	// the host answers 409 CodeHostServed; an older gateway ignores the
	// header, and the two agents take turns as before.
	HeaderStandby = "X-Hostgate-Standby"
	// HeaderCallerPreamble is CallerPreambleProxyV1 in the request when
	// the agent reads a caller preamble at the start of each stream, and
	// in the response when the gateway writes one on every stream of the
	// tunnel: a PROXY protocol v1 line naming the caller, whom the
	// agent's SSH server then reports (SSH_CONNECTION, its logs). Absent
	// from either, no stream carries one (an older agent or gateway).
	HeaderCallerPreamble = "X-Hostgate-Caller-Preamble"
)

// StandbyOn is HeaderStandby's value.
const StandbyOn = "on"

// CodeHostServed is the error code of a standby agent's connect while the
// host's tunnel is another agent's.
const CodeHostServed = "host_served"

// CallerPreambleProxyV1 is HeaderCallerPreamble's value: the HAProxy PROXY
// protocol's version 1 line (internal/proxyproto).
const CallerPreambleProxyV1 = "proxy-v1"

// HeaderPinnedKey, in a request to GET /v1/hosts/{id}/ssh (any value),
// asks for the host's pinned key, which the upgrade's response carries in
// it, in authorized_keys form (absent while the host has none or the
// store cannot say): `gateway proxy --known-hosts` mends a known_hosts
// line a key reset made stale without a request of its own.
const HeaderPinnedKey = "X-Hostgate-Pinned-Key"

// AgentForwardingOff is HeaderAgentForwarding's value for an agent that
// forwards no SSH agent.
const AgentForwardingOff = "off"

// KeyProofSSH is HeaderKeyProof's value: an SSH key exchange.
const KeyProofSSH = "ssh-kex"

// CloseReplaced is the WebSocket close status (RFC 6455 section 7.4.2,
// the range for applications) that ends an agent's tunnel when a newer
// connection for its host took over: an agent that gets it is not the
// one that reconnected, so another agent serves its host.
const CloseReplaced = 4001

// AgentStopping is the reason of the close frame (status 1001, going
// away) an agent that stops (SIGTERM, SIGINT) ends its tunnel with: the
// gateway logs that the agent stopped, where a plain close read as EOF.
const AgentStopping = "agent stopping"

// GatewayStateFile is the gateway's database in its --state-dir: an agent
// given that directory (HOSTGATE_STATE_DIR exported for the gateway's
// commands, which the agent reads too) refuses it rather than write its
// host key beside the gateway's CA key.
const GatewayStateFile = "gateway.db"

// ConnectPath is the agents' WebSocket endpoint.
const ConnectPath = "/v1/agents/connect"

// MaxInfoLen bounds the encoded Info header.
const MaxInfoLen = 4096

// EncodeInfo encodes info for HeaderInfo.
func EncodeInfo(info hostgate.Info) string {
	b, _ := json.Marshal(info) // a struct of strings and a bool cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeInfo decodes HeaderInfo; an empty header is the zero Info.
func DecodeInfo(s string) (hostgate.Info, error) {
	var info hostgate.Info
	if s == "" {
		return info, nil
	}
	if len(s) > MaxInfoLen {
		return info, fmt.Errorf("wire: info header longer than %d bytes", MaxInfoLen)
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return info, fmt.Errorf("wire: info header: %w", err)
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return info, fmt.Errorf("wire: info header: %w", err)
	}
	return info, nil
}

// Error is the body of every error answer: {"error": {"code", "message"}}.
// An execution's gone answer (and the conflict that refuses its id again)
// adds why and when it ended: reason (dockerhost's End* reasons) and
// endedAt (RFC 3339, UTC).
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Reason  string `json:"reason,omitempty"`
	EndedAt string `json:"endedAt,omitempty"`
}

// ErrorBody wraps Error as it travels.
type ErrorBody struct {
	Error Error `json:"error"`
}

// ExecCutError is the error of an exec whose command was cut midway
// (timeout, output_limit, agent_lost, interrupted, storage_unavailable,
// gone), with what the command printed before it was: stdout and stderr
// in Encoding ("" for UTF-8 text, "base64"), and the lossy flags, as an
// exec's result has them.
type ExecCutError struct {
	Error
	Stdout      string `json:"stdout"`
	Stderr      string `json:"stderr"`
	Encoding    string `json:"encoding,omitempty"`
	StdoutLossy bool   `json:"stdoutLossy,omitempty"`
	StderrLossy bool   `json:"stderrLossy,omitempty"`
}

// ExecCutErrorBody wraps ExecCutError as it travels.
type ExecCutErrorBody struct {
	Error ExecCutError `json:"error"`
}

// ParseError extracts the error from an answer body; ok is false when the
// body is not one.
func ParseError(body []byte) (Error, bool) {
	var b ErrorBody
	if json.Unmarshal(body, &b) != nil || b.Error.Code == "" {
		return Error{}, false
	}
	return b.Error, true
}

// HostMessage words the gateway's message about host id, in its JSON
// errors and its WebSocket close reasons alike: "host box: not connected
// to the gateway". A curl user sees which host; a caller that names the
// host itself (the Go client, gateway cert and proxy) drops the prefix
// with TrimHost rather than naming it twice.
func HostMessage(id, msg string) string { return "host " + id + ": " + msg }

// TrimHost is msg without HostMessage's prefix for id.
func TrimHost(id, msg string) string { return strings.TrimPrefix(msg, "host "+id+": ") }
