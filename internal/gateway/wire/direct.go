package wire

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/textcut"
)

// Direct sessions: a caller that can reach an agent's own listener
// (`agent connect --direct ADDR`) runs its SSH session straight to it,
// without the gateway's relay on the path; a caller that cannot falls
// back to the relay. The gateway stays the authority over every such
// session as over a relayed one: the agent asks it to admit each direct
// connection (the token behind the caller's certificate still valid, the
// audit log written) over a control stream of the agent's tunnel, and
// ends the session when the gateway says its token was revoked, or when
// the tunnel itself ends, after which nobody could say so.

// HeaderDirect, in the agent's connect request, lists the addresses
// ("host:port", comma-separated, at most MaxDirectAddrs) its direct
// listener accepts SSH connections on. A gateway that admits direct
// sessions answers with DirectOn in the same header, and then accepts one
// stream the agent opens on the tunnel: the control stream, DirectMsg
// lines both ways. Without DirectOn in the answer (a gateway started with
// --direct-sessions=off, or an older one), the agent refuses every direct
// connection, and callers use the relay. In a caller's request for a
// host's SSH stream, its value is DirectPrefer or DirectAsk.
const HeaderDirect = "X-Hostgate-Direct"

// DirectOn is HeaderDirect's value in the gateway's answer.
const DirectOn = "on"

// HeaderDirectFailed, in a caller's request for a host's relay (GET
// /v1/hosts/{id}/ssh), says why the caller's direct session to the host
// failed just before (the Go client and gateway proxy try the agent's
// addresses first): the gateway logs it with the relay's start and counts
// it, so that an operator sees which callers cannot reach the addresses
// an agent advertises (agent connect --direct-advertise), and why.
// DirectFailedValue makes it; a gateway keeps MaxDirectFailedLen bytes.
const HeaderDirectFailed = "X-Hostgate-Direct-Failed"

// MaxDirectFailedLen bounds HeaderDirectFailed's value.
const MaxDirectFailedLen = 256

// DirectFailedValue is why, as HeaderDirectFailed's value: one line (an
// HTTP header holds no control characters) cut to MaxDirectFailedLen
// bytes and an ellipsis.
func DirectFailedValue(why error) string {
	s := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, why.Error())
	return textcut.Cut(s, MaxDirectFailedLen)
}

// DirectPrefer is HeaderDirect's value in a caller's request for
// GET /v1/hosts/{id}/ssh (`gateway proxy`): the caller would rather
// dial the host's agent itself. When the host has direct addresses, the
// gateway answers 200 with a DirectAnswer instead of upgrading, after
// the relay's own checks (the token, the host it reaches, the rate
// limits) and without an audit entry or a relay: no session happened
// yet. A host without addresses, or a gateway without direct sessions
// or older than them, relays at once as for a request without the
// header, so asking costs a caller nothing there.
const DirectPrefer = "prefer"

// DirectAsk is DirectPrefer for a caller that cannot take a relay on the
// same request: `gateway proxy --fdpass`, which hands ssh a socket and
// exits, so that a relay must run in a process of its own. A host with
// direct addresses is answered as for DirectPrefer; one not enrolled, or
// whose execution ended, 404 or 410 as the relay answers it; any other
// gets 204 No Content, after the same checks, and the caller asks again
// for the relay. A gateway older than DirectAsk relays at once, as for a request
// without the header.
const DirectAsk = "ask"

// MaxDirectAnswerLen bounds a DirectAnswer's body, as much of a refused
// upgrade's answer as a WebSocket client keeps (coder/websocket reads 1
// KiB of it): MaxDirectAddrs IPv6 addresses and an Ed25519 key, an
// agent's, take half. A gateway whose answer would be longer (long DNS
// names, a large RSA key) relays instead.
const MaxDirectAnswerLen = 1024

// DirectAnswer is the gateway's answer to DirectPrefer (JSON): where the
// host's agent listens for direct sessions, and the host key the gateway
// pins for it, in authorized_keys form. Only an SSH server that shows
// that key is the host: an address may reach another machine from the
// caller's network.
type DirectAnswer struct {
	Direct        []string `json:"direct"`
	HostPublicKey string   `json:"hostPublicKey"`
}

// ParseDirectAnswer parses and checks a DirectAnswer's body: at least
// one address, as ParseDirectAddrs takes them, and a public key; the
// addresses come back in ParseDirectAddrs' form, the key parsed.
func ParseDirectAnswer(body []byte) (DirectAnswer, ssh.PublicKey, error) {
	if len(body) > MaxDirectAnswerLen {
		return DirectAnswer{}, nil, fmt.Errorf("wire: direct answer longer than %d bytes", MaxDirectAnswerLen)
	}
	var a DirectAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return DirectAnswer{}, nil, fmt.Errorf("wire: direct answer: %w", err)
	}
	if len(a.Direct) == 0 {
		return DirectAnswer{}, nil, errors.New("wire: direct answer: no address")
	}
	for _, d := range a.Direct {
		if strings.Contains(d, ",") {
			return DirectAnswer{}, nil, fmt.Errorf("wire: direct answer: address %q holds a comma", textcut.Cut(d, 64))
		}
	}
	addrs, err := ParseDirectAddrs(strings.Join(a.Direct, ","))
	if err != nil {
		return DirectAnswer{}, nil, fmt.Errorf("wire: direct answer: %w", err)
	}
	pub, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(a.HostPublicKey))
	if err != nil || len(strings.TrimSpace(string(rest))) > 0 {
		return DirectAnswer{}, nil, errors.New("wire: direct answer: hostPublicKey is not one public key in authorized_keys form")
	}
	if _, isCert := pub.(*ssh.Certificate); isCert {
		return DirectAnswer{}, nil, errors.New("wire: direct answer: hostPublicKey is a certificate, not a host key")
	}
	return DirectAnswer{Direct: addrs, HostPublicKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))}, pub, nil
}

// CertTokenExtension is the certificate extension the gateway signs into
// every user certificate: the id of the token the certificate was issued
// to, by which a direct session's admission looks the token up again. An
// agent verifies the certificate's signature, so the id is the gateway's
// own word. OpenSSH ignores extensions it does not know.
const CertTokenExtension = "token-id@hostgate"

// MaxDirectAddrs bounds HeaderDirect's list, and maxDirectAddrLen each
// address in it.
const (
	MaxDirectAddrs   = 8
	maxDirectAddrLen = 262 // a 253-byte DNS name, ':' and a port
)

// ParseDirectAddrs parses HeaderDirect's value in a request: host:port
// addresses, each host an IP address or a DNS name, each port 1-65535.
func ParseDirectAddrs(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("wire: direct addresses: empty list")
	}
	parts := strings.Split(s, ",")
	if len(parts) > MaxDirectAddrs {
		return nil, fmt.Errorf("wire: direct addresses: %d of them, at most %d", len(parts), MaxDirectAddrs)
	}
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		a, err := checkDirectAddr(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("wire: direct address %q: %w", textcut.Cut(p, 64), err)
		}
		out = append(out, a)
	}
	return out, nil
}

func checkDirectAddr(a string) (string, error) {
	if a == "" {
		return "", errors.New("empty")
	}
	if len(a) > maxDirectAddrLen {
		return "", fmt.Errorf("longer than %d bytes", maxDirectAddrLen)
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return "", errors.New("want host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return "", errors.New("want a port from 1 to 65535")
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsUnspecified() || ip.IsMulticast() {
			return "", errors.New("an unspecified or multicast address cannot be dialed")
		}
		return net.JoinHostPort(ip.String(), port), nil
	}
	if !dnsName(host) {
		return "", errors.New("the host is neither an IP address nor a DNS name")
	}
	return net.JoinHostPort(strings.ToLower(host), port), nil
}

// dnsName: letters, digits, '-' and '.', labels of 1-63 bytes.
func dnsName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// Control stream operations. The agent sends DirectOpen for a connection
// that authenticated with a certificate and DirectClosed when it ends
// (admitted or not); the gateway answers each DirectOpen with DirectAdmit
// or DirectRefuse, and sends DirectEnd for an admitted session whose
// token was revoked or expired.
const (
	DirectOpen   = "open"
	DirectAdmit  = "admit"
	DirectRefuse = "refuse"
	DirectEnd    = "end"
	DirectClosed = "closed"
)

// MaxDirectMsgLen bounds one control stream line, newline included.
const MaxDirectMsgLen = 4096

// DirectMsg is one line of the control stream (JSON). ID is the agent's
// number for the connection, unique on its control stream.
type DirectMsg struct {
	Op string `json:"op"`
	ID uint64 `json:"id"`
	// Open: the certificate's serial, key id and CertTokenExtension, and
	// the caller's address as the agent saw it.
	Serial  uint64 `json:"serial,omitempty"`
	KeyID   string `json:"keyId,omitempty"`
	TokenID string `json:"tokenId,omitempty"`
	Remote  string `json:"remote,omitempty"`
	// Refuse, end, closed: why, in words for a person.
	Reason string `json:"reason,omitempty"`
	// Closed: the bytes the session carried each way.
	ToHost   int64 `json:"toHost,omitempty"`
	FromHost int64 `json:"fromHost,omitempty"`
}

// Check says whether m is a well-formed message of its op.
func (m *DirectMsg) Check() error {
	switch m.Op {
	case DirectOpen:
		if m.TokenID == "" {
			return errors.New("wire: direct open: no token id")
		}
	case DirectAdmit, DirectRefuse, DirectEnd, DirectClosed:
	default:
		return fmt.Errorf("wire: direct message: unknown op %q", textcut.Cut(m.Op, 32))
	}
	if m.ToHost < 0 || m.FromHost < 0 {
		return errors.New("wire: direct message: negative byte count")
	}
	return nil
}

// ReadDirectMsg reads one control stream line and checks it.
func ReadDirectMsg(r *bufio.Reader) (DirectMsg, error) {
	var m DirectMsg
	line, err := r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return m, fmt.Errorf("wire: direct message longer than %d bytes", r.Size())
	case err == io.EOF && len(line) > 0:
		return m, io.ErrUnexpectedEOF
	case err != nil:
		return m, err
	}
	if len(line) > MaxDirectMsgLen {
		return m, fmt.Errorf("wire: direct message longer than %d bytes", MaxDirectMsgLen)
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return DirectMsg{}, fmt.Errorf("wire: direct message: %w", err)
	}
	if err := m.Check(); err != nil {
		return DirectMsg{}, err
	}
	return m, nil
}

// NewDirectReader is the reader ReadDirectMsg wants for a control stream:
// one line fits its buffer whole.
func NewDirectReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, MaxDirectMsgLen) }

// AppendDirectMsg appends m's line to b. Its strings are cut so that the
// line stays within MaxDirectMsgLen even when JSON escapes every byte
// (six bytes each, as \u0001).
func AppendDirectMsg(b []byte, m DirectMsg) []byte {
	m.Op = textcut.Cut(m.Op, 16)
	m.Reason = textcut.Cut(m.Reason, 300)
	m.KeyID = textcut.Cut(m.KeyID, 150)
	m.TokenID = textcut.Cut(m.TokenID, 64)
	m.Remote = textcut.Cut(m.Remote, 100)
	j, _ := json.Marshal(m) // strings and numbers cannot fail
	return append(append(b, j...), '\n')
}
