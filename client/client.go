// Package client is the Go caller's side of a hostgate gateway: it lists
// hosts, gets short-lived SSH certificates and turns (gateway URL, token,
// host id) into a ready *hostgate.Host whose SSH session runs end to end to
// the host's agent, with the host key pinned to what the gateway published.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/textcut"
	"github.com/hostgate/hostgate/internal/tlshint"
)

// Client talks to one gateway with one token.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
	ws    *http.Client             // the caller's HTTPClient for handshakes, without its Timeout; nil: bytestream's own
	roots *x509.CertPool           // Options.RootCAs, for bytestream's own transport
	agent func() (net.Conn, error) // Options.ForwardAgent

	hostOpts []hostgate.Option // Options.Reconnect

	// creds are the session key and certificate of each host id dialed,
	// kept across its reconnects (credentialsFor).
	credMu sync.Mutex
	creds  map[string]*credentials
	// credsPruneAt is the size of creds that has credentialsFor prune it
	// (pruneCredentialsLocked); guarded by credMu.
	credsPruneAt int
	direct       map[string]*directState // by host id; guarded by credMu

	relayOnly bool // Options.RelayOnly
}

// Options are the knobs of New.
type Options struct {
	// HTTPClient is used for API calls and WebSocket handshakes (a
	// gateway behind a private CA, a proxy); nil means a transport of the
	// client's own with http.DefaultTransport's settings. Its Timeout bounds the API calls
	// that answer at once (hosts, certificates, Execution, Terminate,
	// checkpoints' records), not the WebSocket streams, nor the calls that
	// wait on work (Exec, Provision, Checkpoint, Restore), which ctx alone
	// bounds: the gateway destroys an execution whose exec's caller left.
	HTTPClient *http.Client
	// RootCAs, when HTTPClient is nil, are the CAs the gateway's TLS
	// certificate is checked against instead of the system's: a gateway
	// whose certificate comes from a private CA, or a self-signed one
	// (its certificate is its own CA). Unlike an HTTPClient of the
	// caller's, it keeps the WebSocket streams on the client's own
	// transport, which writes their frames itself and costs less CPU per
	// byte.
	RootCAs *x509.CertPool
	// ForwardAgent, when set, forwards an SSH agent to the processes of
	// the hosts this client dials, as ssh -A does
	// (sshlayer.ClientConfig.ForwardAgent): each connection a process
	// makes to its SSH_AUTH_SOCK reaches a connection ForwardAgent dials,
	// such as net.Dial("unix", os.Getenv("SSH_AUTH_SOCK")). A machine's
	// agent grants it unless started with --no-agent-forwarding; a
	// sandbox never does.
	ForwardAgent func() (net.Conn, error)
	// Reconnect makes the hosts this client hands out (Dial, LazyHost)
	// connect again on their first use after their connection was lost:
	// the host's agent restarted, the gateway restarted, keepalives
	// failed (hostgate.Reconnect). Without it such a Host fails every
	// later use, and the caller Dials again.
	Reconnect bool
	// RelayOnly runs every SSH session through the gateway's relay, even
	// to a host whose agent accepts direct sessions (agent connect
	// --direct; see Certificate.Direct): where the network between the
	// caller and the host must not carry them, or to measure the relay.
	RelayOnly bool
}

// New returns a client for the gateway at gatewayURL (http(s):// or
// ws(s)://, the gateway's base URL) with token. Its errors name the
// argument at fault and what it wants; the token's never quote it.
func New(gatewayURL, token string, opts *Options) (*Client, error) {
	u, err := gatewayBase(gatewayURL)
	if err != nil {
		return nil, err
	}
	if err := checkToken(token); err != nil {
		return nil, err
	}
	c := &Client{base: u, token: token, http: &http.Client{Transport: ownTransport(nil)}}
	if opts != nil {
		c.agent = opts.ForwardAgent
		c.roots = opts.RootCAs
		if opts.RootCAs != nil {
			c.http = &http.Client{Transport: ownTransport(opts.RootCAs)}
		}
		c.relayOnly = opts.RelayOnly
		if opts.Reconnect {
			c.hostOpts = []hostgate.Option{hostgate.Reconnect()}
		}
	}
	if opts != nil && opts.HTTPClient != nil {
		c.http = opts.HTTPClient
		ws := *opts.HTTPClient
		ws.Timeout = 0 // it would end the stream, and coder/websocket refuses one
		c.ws = &ws
	}
	return c, nil
}

// ownTransport is the transport of a Client given no HTTPClient: its own,
// so that CloseIdleConnections releases its connections and no others
// (with http.DefaultTransport, a program could release them only by
// closing every idle connection it had).
func ownTransport(roots *x509.CertPool) http.RoundTripper {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t = t.Clone()
		if roots != nil {
			t.TLSClientConfig = &tls.Config{RootCAs: roots}
		}
		return t
	}
	if roots != nil {
		return &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: &tls.Config{RootCAs: roots}}
	}
	return http.DefaultTransport // replaced by the program: its to manage
}

// CloseIdleConnections closes the connections to the gateway that the
// client's API calls keep open for its next call (each holds two
// goroutines until the transport's idle timeout, 90 s by default): call it
// when done with the client, before a test checks for leaked goroutines,
// say. The client stays usable; its next call connects again. Hosts it
// handed out are not affected: their SSH streams are their own, ended by
// their Close. With Options.HTTPClient it closes that client's idle
// connections, as http.Client.CloseIdleConnections does.
func (c *Client) CloseIdleConnections() {
	c.http.CloseIdleConnections()
	if c.ws != nil {
		c.ws.CloseIdleConnections()
	}
}

// gatewayBase parses New's gateway URL. Its errors quote it redacted
// (redactURL): whatever stands before an '@' in it may be a token.
func gatewayBase(raw string) (*url.URL, error) {
	const want = "want the gateway's base URL, such as https://gw.example.com or http://127.0.0.1:8080"
	shown := redactURL(raw)
	if raw == "" {
		return nil, errors.New("client: no gateway URL: " + want)
	}
	if !strings.Contains(raw, "://") { // gw.example.com, or host:port taken for scheme:opaque
		return nil, fmt.Errorf("client: gateway URL %q has no scheme: want https://%s (or http:// for a gateway without TLS)", shown, strings.TrimLeft(shown, "/"))
	}
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil {
		return nil, fmt.Errorf("client: gateway URL %q: %v; %s", shown, errors.Unwrap(err), want)
	}
	switch u.Scheme { // url.Parse lowers it
	case "http", "https":
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	default:
		return nil, fmt.Errorf("client: gateway URL %q: scheme %q; want http://, https://, ws:// or wss://", shown, u.Scheme)
	}
	switch {
	case u.Host == "":
		return nil, fmt.Errorf("client: gateway URL %q has no host: %s", shown, want)
	case u.User != nil:
		return nil, fmt.Errorf("client: gateway URL %q holds credentials, which are never sent: take them out, and pass the gateway token as New's token", shown)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("client: gateway URL %q has a query or fragment, which its API paths would drop: %s", shown, want)
	}
	return u, nil
}

// redactURL is raw with what stands before an '@' in its authority, a
// user name and password, as "xxxxx": url.URL.Redacted keeps the user
// name, where a token is put as git's https://TOKEN@host puts it, and
// parses nothing that does not parse. Quoted unredacted, such a URL put
// the token in the program's log.
func redactURL(raw string) string {
	prefix, rest := "", raw
	if i := strings.Index(raw, "://"); i >= 0 {
		prefix, rest = raw[:i+3], raw[i+3:]
	} else if r, ok := strings.CutPrefix(raw, "//"); ok {
		prefix, rest = "//", r
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		return prefix + "xxxxx" + rest[at:]
	}
	return raw
}

// checkToken checks New's token without quoting it, a secret.
func checkToken(token string) error {
	if token == "" {
		return errors.New("client: no token: pass a token from `gateway token create` (the gateway's commands read HOSTGATE_TOKEN)")
	}
	for i, r := range token {
		if r <= ' ' || r == 0x7f {
			where := fmt.Sprintf("at byte %d of %d", i, len(token))
			if strings.TrimSpace(token) != token && strings.TrimSpace(token) != "" {
				where = "around it (a newline left by reading it from a file?)"
			}
			return fmt.Errorf("client: the token holds whitespace or a control character %s, which an Authorization header cannot carry: trim it", where)
		}
	}
	return nil
}

// HostRecord is what the gateway publishes about a host.
type HostRecord struct {
	ID            string        `json:"id"`
	Kind          string        `json:"kind"`
	Info          hostgate.Info `json:"info"`
	HostKey       string        `json:"hostKey"`
	HostPublicKey string        `json:"hostPublicKey"`
	Connected     bool          `json:"connected"`
	// AgentVersion is the build the host's agent says it is while it is
	// connected (see the README); empty for a host not connected now, a
	// sandbox, or a gateway older than December 2026.
	AgentVersion string `json:"agentVersion,omitempty"`
	// Direct are the addresses the host's agent accepts direct SSH
	// sessions on while it is connected (agent connect --direct), as
	// Certificate.Direct.
	Direct []string `json:"direct,omitempty"`
}

// Certificate is a signed short-lived user certificate.
type Certificate struct {
	Certificate string    `json:"certificate"` // authorized_keys format
	ValidBefore time.Time `json:"validBefore"`
	HostKey     string    `json:"hostKey"`
	// HostPublicKey is the host's pinned key in authorized_keys form;
	// empty from a gateway older than December 2026.
	HostPublicKey string `json:"hostPublicKey"`
	// Direct are the addresses ("host:port") the host's agent accepts
	// direct SSH sessions on (agent connect --direct), which the client
	// tries before the relay; empty when it accepts none, or the gateway
	// admits none (gateway serve --direct-sessions=off).
	Direct []string `json:"direct,omitempty"`
}

// APIError is an error answer of the gateway. Message is the gateway's
// own, which names the host it is about ("host box: not connected to the
// gateway"); where the client begins the error with the host itself (Dial,
// a Host's errors, DialSSH), Error leaves that out: "host box: gateway:
// invalid token: … (401 unauthorized)".
type APIError struct {
	Status  int
	Code    string
	Message string
	// Reason and EndedAt say why and when an execution ended, in its gone
	// answer (Code "gone", Status 410) and in the conflict that refuses a
	// provision naming its id (ids are not reused): "terminated" (a
	// Terminate), "timeout", "output_limit" or "aborted" (a command's
	// end destroyed it), "runtime" (resources.runtimeMs ran out),
	// "container_gone" (its container went outside the gateway) or
	// "unknown" (recorded by an older gateway). Empty and zero otherwise.
	Reason  string
	EndedAt time.Time
	// Stdout and Stderr, in the answer of an exec whose command was cut
	// midway ("timeout" 504 and "output_limit" 422, the execution
	// destroyed; "agent_lost" 502, "interrupted" and
	// "storage_unavailable" 503; "gone" 410, the execution ended under
	// it), are what the command printed before it was cut: at most its
	// maxOutputBytes in all, for output_limit the bytes up to that
	// limit. They are the raw bytes, as ExecResult's are; StdoutLossy
	// and StderrLossy are ExecResult's too. Empty for every other
	// answer, and from gateways older than December 2026.
	Stdout, Stderr           string
	StdoutLossy, StderrLossy bool

	named string // the host the error is told under, whose name Error drops from Message
}

func (e *APIError) Error() string { return "gateway: " + e.text() }

// text is Error without the "gateway: " it begins with.
func (e *APIError) text() string {
	msg := e.Message
	if e.named != "" {
		msg = wire.TrimHost(e.named, msg)
	}
	return fmt.Sprintf("%s (%d %s)", msg, e.Status, e.Code)
}

// underHost marks the gateway's error in err as told under a prefix that
// names host id ("host box: …"), so that its message does not name the
// host again; it returns err.
func underHost(id string, err error) error {
	var ae *APIError
	if errors.As(err, &ae) {
		ae.named = id
	}
	return err
}

// Hosts lists the hosts the token may reach.
func (c *Client) Hosts(ctx context.Context) ([]HostRecord, error) {
	var raw json.RawMessage
	if err := c.do(ctx, "GET", "/v1/hosts", nil, &raw); err != nil {
		return nil, err
	}
	var list []HostRecord
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var wrapped struct {
		Hosts []HostRecord `json:"hosts"`
	}
	if err := json.Unmarshal(raw, &wrapped); err != nil {
		return nil, fmt.Errorf("client: decode hosts: %w", err)
	}
	return wrapped.Hosts, nil
}

// Host returns one host's record.
func (c *Client) Host(ctx context.Context, id string) (*HostRecord, error) {
	if id == "" {
		return nil, errEmptyID("host")
	}
	var h HostRecord
	if err := c.do(ctx, "GET", "/v1/hosts/"+url.PathEscape(id), nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// Certificate asks the gateway to sign publicKey (authorized_keys format)
// for host id.
func (c *Client) Certificate(ctx context.Context, id, publicKey string) (*Certificate, error) {
	if id == "" {
		return nil, errEmptyID("host")
	}
	var cert Certificate
	body := map[string]string{"publicKey": publicKey}
	if err := c.do(ctx, "POST", "/v1/hosts/"+url.PathEscape(id)+"/certificates", body, &cert); err != nil {
		return nil, err
	}
	return &cert, nil
}

// errEmptyID refuses a call with an empty id before it is sent: the
// gateway would answer a path without it, "no such endpoint" or "POST is
// not allowed here" (an exec's, after a redirect), naming neither the id
// nor the mistake (found by the audit31 audit).
func errEmptyID(what string) error {
	return fmt.Errorf("client: the %s id is empty", what)
}

// apiErrorOf is the gateway's answer of status with body b as an error:
// its JSON error's code and message, else the status text and what
// answered instead (wire.ForeignAnswer: a proxy's page for a gateway that
// is down, say).
func apiErrorOf(status int, b []byte) *APIError {
	apiErr := &APIError{Status: status, Code: http.StatusText(status), Message: wire.ForeignAnswer(status, string(b))}
	// An exec cut midway adds its output so far.
	var e wire.ExecCutErrorBody
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		apiErr.Code, apiErr.Message, apiErr.Reason = e.Error.Code, e.Error.Message, e.Error.Reason
		if t, err := time.Parse(time.RFC3339Nano, e.Error.EndedAt); err == nil {
			apiErr.EndedAt = t
		}
		apiErr.Stdout, apiErr.Stderr = e.Error.Stdout, e.Error.Stderr
		apiErr.StdoutLossy, apiErr.StderrLossy = e.Error.StdoutLossy, e.Error.StderrLossy
		if e.Error.Encoding == EncodingBase64 {
			out, oerr := base64.StdEncoding.DecodeString(apiErr.Stdout)
			serr, eerr := base64.StdEncoding.DecodeString(apiErr.Stderr)
			if oerr != nil || eerr != nil {
				// Not the gateway's: say so rather than hand on
				// base64 as if it were the output.
				apiErr.Stdout, apiErr.Stderr = "", ""
				apiErr.Message += " (its output came as invalid base64 and was dropped)"
			} else {
				apiErr.Stdout, apiErr.Stderr = string(out), string(serr)
			}
		}
	}
	if len(apiErr.Message) > 512 {
		// Cut between characters: a message cut inside one prints
		// as mojibake (and is not valid UTF-8 for a JSON encoder).
		n := 512
		for n > 0 && !utf8.RuneStart(apiErr.Message[n]) {
			n--
		}
		apiErr.Message = apiErr.Message[:n] + "…"
	}
	return apiErr
}

// handshakeError is a refused WebSocket handshake told as the API's
// errors are ("gateway: host box: too many streams to the host (503
// too_many_streams)", not the raw JSON body), for errors.As both as an
// *APIError and as the *bytestream.HandshakeError it was.
type handshakeError struct {
	*APIError
	he *bytestream.HandshakeError
}

func (e *handshakeError) Unwrap() []error { return []error{e.APIError, e.he} }

// DialSSH opens the byte stream to host id's SSH server through the
// gateway. The stream carries SSH end to end; the gateway cannot read it.
func (c *Client) DialSSH(ctx context.Context, id string) (net.Conn, error) {
	conn, err := c.dialSSH(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("client: ssh stream to host %s: %w", id, err)
	}
	return conn, nil
}

// dialSSH is DialSSH for a caller whose errors name the host already (a
// Host's connect, the synchronous filesystem's): its errors carry neither
// the id nor a prefix, each caller saying what it was doing, and the
// gateway's refusal in them leaves the host's name to that caller
// (underHost).
func (c *Client) dialSSH(ctx context.Context, id string) (net.Conn, error) {
	return c.dialSSHOn(ctx, id, nil)
}

// sshURL is the URL of host id's SSH stream.
func (c *Client) sshURL(id string) string {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + "/v1/hosts/" + url.PathEscape(id) + "/ssh"
	return u.String()
}

// dialSSHOn is dialSSH on the connection pre made, where it made one
// (predial).
func (c *Client) dialSSHOn(ctx context.Context, id string, pre *bytestream.Predialed) (net.Conn, error) {
	if id == "" {
		return nil, errEmptyID("host")
	}
	hdr := http.Header{}
	hdr.Set("Authorization", "Bearer "+c.token)
	if why, ok := ctx.Value(directFailedKey{}).(error); ok {
		hdr.Set(wire.HeaderDirectFailed, wire.DirectFailedValue(why))
	}
	conn, err := bytestream.WebSocket(ctx, c.sshURL(id), &bytestream.WebSocketOptions{Header: hdr, HTTPClient: c.ws, RootCAs: c.roots, Predialed: pre})
	if err != nil {
		var he *bytestream.HandshakeError
		if errors.As(err, &he) {
			apiErr := apiErrorOf(he.StatusCode, []byte(he.Body))
			apiErr.named = id
			err = &handshakeError{APIError: apiErr, he: he}
		}
		return nil, tlshint.Wrap(err)
	}
	return conn, nil
}

// apiCallTimeout bounds an API call that answers at once (listing hosts,
// a certificate); the calls that wait on work (exec, provision,
// checkpoint, restore) are bounded by the caller's ctx alone. A 30 s
// client timeout on every call cut an exec of a longer command, and the
// gateway, seeing its caller gone, destroyed the execution.
var apiCallTimeout = 30 * time.Second // a var for tests

// do makes an API call that answers at once, bounded by apiCallTimeout
// and by the caller's HTTPClient.Timeout.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, apiCallTimeout)
	defer cancel()
	return c.doLimit(ctx, c.http, maxAnswer, method, path, in, out)
}

// maxAnswer bounds the answer of an API call read into memory, but an
// exec's (maxExecAnswer).
const maxAnswer = 16 << 20

// doLong makes an API call that waits on work, bounded by ctx alone.
func (c *Client) doLong(ctx context.Context, method, path string, in, out any) error {
	return c.doLimit(ctx, c.longHTTP(), maxAnswer, method, path, in, out)
}

// longHTTP is the HTTP client of the calls that wait on work: the
// caller's without its Timeout, which would cut an exec of a longer
// command, and the gateway, seeing its caller gone, would destroy the
// execution (an HTTPClient with a 2 s Timeout destroyed the execution of
// an exec of sleep 3 with timeoutMs 10000; found by the audit31 audit).
func (c *Client) longHTTP() *http.Client {
	if c.ws != nil {
		return c.ws
	}
	return c.http
}

// doLimit makes an API call through hc, for an answer of up to limit
// bytes; a longer one is an error that says so, not JSON cut short.
func (c *Client) doLimit(ctx context.Context, hc *http.Client, limit int64, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	u := *c.base
	path, query, _ := strings.Cut(path, "?")
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method != http.MethodGet && method != http.MethodHead {
		hc = keepMethodOnRedirect(hc)
	}
	res, err := hc.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) && ctx.Err() == nil {
			// net/http's words name the call and the refusal, not what
			// is wrong: an agent runtime started before its gateway.
			err = fmt.Errorf("%w (no gateway answers at %s: is it running, and is that its URL?)", err, c.base.Redacted())
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			return tlshint.Wrap(err) // `Get "https://gw/v1/hosts/box": dial tcp …` names the call already
		}
		return fmt.Errorf("client: %s %s: %w", method, path, tlshint.Wrap(err))
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		return fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	if int64(len(b)) > limit {
		return fmt.Errorf("client: %s %s: the answer (%d %s) is longer than the %d bytes the client reads", method, path, res.StatusCode, http.StatusText(res.StatusCode), limit)
	}
	if movedAsGet(res.StatusCode) && res.Header.Get("Location") != "" && method != http.MethodGet && method != http.MethodHead {
		return redirectRefused(method, path, res)
	}
	if res.StatusCode/100 != 2 {
		return apiErrorOf(res.StatusCode, b)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("client: decode %s %s: %w", method, path, err)
	}
	return nil
}

// keepMethodOnRedirect is hc following only the redirects that repeat a
// request as it was (307, 308). net/http follows a 301, 302 or 303 of a
// POST or DELETE with a GET of the new address, without the body: behind a
// front that redirects (http:// to https://, another path) Terminate and
// DeleteCheckpoint took the GET's 200 for done and destroyed nothing, and
// Provision read the list of executions as an execution with no id.
func keepMethodOnRedirect(hc *http.Client) *http.Client {
	c := *hc
	check := hc.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.Method != via[0].Method {
			return http.ErrUseLastResponse // redirectRefused says why
		}
		if check != nil {
			return check(req, via)
		}
		if len(via) >= 10 { // net/http's own bound, which a CheckRedirect replaces
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &c
}

// movedAsGet reports whether net/http follows a redirect of status with a
// GET whatever the request's method.
func movedAsGet(status int) bool {
	return status == http.StatusMovedPermanently || status == http.StatusFound || status == http.StatusSeeOther
}

// redirectRefused is the error of a call whose answer res is a redirect
// not followed (keepMethodOnRedirect): it names where to, and the gateway
// URL that leads there directly where the redirect keeps the API's path.
func redirectRefused(method, path string, res *http.Response) error {
	where := textcut.Cut(res.Header.Get("Location"), 200)
	fix := "check that the gateway URL given to New is the gateway's --public-url"
	if to, err := res.Location(); err == nil {
		where = textcut.Cut(to.Redacted(), 200)
		if base, ok := strings.CutSuffix(to.EscapedPath(), path); ok && to.RawQuery == "" && to.Host != "" {
			fix = "give New the gateway URL it leads to, " + textcut.Cut(to.Scheme+"://"+to.Host+base, 200)
		}
	}
	return fmt.Errorf("client: %s %s: the gateway URL answered %d %s, a redirect to %s, which net/http would follow as a GET without the request's body: %s", method, path, res.StatusCode, http.StatusText(res.StatusCode), where, fix)
}

// ErrOffline is returned when the gateway says the host has no live tunnel.
var ErrOffline = errors.New("client: host is offline")

// offlineError is the gateway's refusal of a stream to a host it holds no
// tunnel of, told once: "offline: not connected to the gateway (503
// host_offline)", where wrapping it in ErrOffline's words and the
// *APIError's read "client: host is offline: gateway: not connected to
// the gateway (503 host_offline)". It is ErrOffline for errors.Is, and
// the *APIError (and *bytestream.HandshakeError) for errors.As.
type offlineError struct {
	api *APIError
	err error // the refusal, api in it
}

func (e *offlineError) Error() string   { return "offline: " + e.api.text() }
func (e *offlineError) Unwrap() []error { return []error{ErrOffline, e.err} }
