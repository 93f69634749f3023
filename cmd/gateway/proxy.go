package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/bytestream"
	"github.com/hostgate/hostgate/internal/bicopy"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/tlshint"
)

// proxyHandshakeTimeout bounds the proxy's WebSocket handshake (a
// variable for tests).
var proxyHandshakeTimeout = bytestream.DefaultHandshakeTimeout

func init() {
	register("proxy", "proxy HOST: OpenSSH ProxyCommand, stdio ↔ the host's SSH through the gateway", runProxy)
}

func runProxy(ctx context.Context, sio stdio, args []string) error {
	var gw, token, caFile string
	var o proxyOptions
	fs := newFlags("proxy", sio)
	fs.StringVar(&gw, "url", "", "gateway URL (http(s):// or ws(s)://)")
	fs.StringVar(&token, "token", "", "client or admin token")
	fs.StringVar(&caFile, "ca-file", "", caFileUsage)
	fs.StringVar(&o.knownHosts, "known-hosts", "", "the known_hosts `FILE` that gateway cert --known-hosts keeps: its line for HOST is rewritten before ssh checks the host key when the gateway pins another key (after gateway host reset-key); the gateway names it on this connection, so it costs no request")
	fs.BoolVar(&o.relayOnly, "relay-only", false, "always go through the gateway's relay, even to a host whose agent listens for direct sessions (agent connect --direct), which the proxy otherwise dials itself when it reaches one of its addresses")
	fs.BoolVar(&o.verbose, "verbose", false, "say on stderr which path the session took: straight to the host's agent, or the gateway's relay, and why not the direct one")
	fs.BoolVar(&o.fdpass, "fdpass", false, "hand ssh its connection and exit (with ProxyUseFdpass yes in ssh's config, Unix only): a direct session's socket then joins ssh to the agent with no process between them; a relay is handed over as a socket whose other end a gateway proxy of its own serves in the background")
	if err := parseUsage(fs, args, "usage: gateway proxy [--url URL] [--token TOKEN] [--ca-file FILE] [--known-hosts FILE] [--relay-only] [--verbose] [--fdpass] HOST\n\nOpenSSH's ProxyCommand: joins stdin/stdout to host HOST's SSH: straight to its agent when it listens for direct sessions and one of its addresses answers with its pinned host key, else through the gateway."); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(sio.err, "usage: gateway proxy [--url URL] [--token TOKEN] [--ca-file FILE] [--known-hosts FILE] [--relay-only] [--verbose] [--fdpass] HOST")
		return errUsage
	}
	// A token file's newline, kept by HOSTGATE_TOKEN made of the file,
	// made net/http refuse the request ("invalid header field value for
	// Authorization"), which said nothing of the newline.
	token = strings.TrimSpace(token)
	if gw == "" || token == "" {
		return errors.New("proxy: --url and --token (or HOSTGATE_URL, HOSTGATE_TOKEN) are required")
	}
	if err := checkProxyURL(gw); err != nil {
		fmt.Fprintln(sio.err, "gateway:", err)
		return reportedError{err}
	}
	if caFile != "" {
		var err error
		if o.roots, err = tlshint.CAFile(caFile); err != nil {
			return fmt.Errorf("proxy: %w", err)
		}
		o.caFile = caFile
	}
	// Set by --fdpass for the relay it starts (fdpassRelay) alone.
	o.directFailed = os.Getenv(envDirectFailed)
	if o.fdpass {
		return proxyFdpass(ctx, sio.out, sio.err, gw, token, fs.Arg(0), o)
	}
	return proxy(ctx, sio.conn(), sio.err, gw, token, fs.Arg(0), o)
}

// proxyOptions are gateway proxy's knobs; the zero value is the default.
type proxyOptions struct {
	knownHosts string         // --known-hosts
	roots      *x509.CertPool // --ca-file's; nil: the system's
	caFile     string         // --ca-file, for a relay of --fdpass's
	relayOnly  bool           // --relay-only: no direct path
	verbose    bool           // --verbose: say which path, and why
	fdpass     bool           // --fdpass: hand ssh its socket (proxy_fdpass_unix.go)
	// directFailed is why --fdpass's direct path failed, for the relay
	// it started (wire.HeaderDirectFailed); empty otherwise.
	directFailed string
}

// caFileUsage is --ca-file's, for the commands that reach a gateway.
const caFileUsage = "PEM `FILE` of a CA to trust for the gateway's TLS certificate beside the system's: a private CA, or the gateway's self-signed certificate"

// conn is the standard streams as one stream: the process's fds 0 and 1
// in production, pipes in tests.
func (s stdio) conn() net.Conn {
	if s.in == os.Stdin {
		return bytestream.Stdio()
	}
	r, ok := s.in.(io.ReadCloser)
	if !ok {
		r = io.NopCloser(s.in)
	}
	w, ok := s.out.(io.WriteCloser)
	if !ok {
		w = nopWriteCloser{s.out}
	}
	return bytestream.NewPipeConn(r, w)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// proxy joins local (stdio) to host's SSH: straight to its agent when
// the gateway answers with direct addresses, one answers and shows the
// pinned host key (proxy_direct.go), else through the gateway's relay.
// An error before the join is printed to stderr before local closes: ssh
// takes the closed stdout for the end, exits and hangs up on its
// ProxyCommand, which died before it could say why (ssh showed only
// "Connection closed by remote host"). A direct path that fails is not an
// error: the relay is dialed, and the reason said only with o.verbose.
//
// With o.knownHosts, the gateway's answer names the host's pinned key, and
// a line for host in that file naming another (a key reset since `gateway
// cert` wrote it) is rewritten before a byte of the host's reaches ssh,
// which reads the file only to check the key the host then sends.
func proxy(ctx context.Context, local net.Conn, stderr io.Writer, gw, token, host string, o proxyOptions) error {
	fail := func(err error) error {
		fmt.Fprintln(stderr, "gateway:", printable(err.Error()))
		_ = local.Close()
		return reportedError{err}
	}
	say := proxySay(stderr, host, o)
	u, h, err := proxyRequest(gw, token, host, o)
	if err != nil {
		return fail(err)
	}
	if o.directFailed != "" && o.relayOnly {
		h.Set(wire.HeaderDirectFailed, o.directFailed)
	}
	memo := directMemoFor(gw, host)
	direct := !o.relayOnly && memo.usable(say)
	if direct {
		h.Set(wire.HeaderDirect, wire.DirectPrefer)
	}
	// DialWebSocket's own bound, so that a gateway that never answers is
	// named as one: a ctx of the proxy's made ssh's stderr read "context
	// deadline exceeded" alone.
	// WriteThrough: the copy below reads what ssh wrote to the pipe, up
	// to 256 KiB at a time, and a flusher goroutine behind it only added
	// a hand-off per read.
	wsOpts := &bytestream.WebSocketOptions{Header: h, HandshakeTimeout: proxyHandshakeTimeout, RootCAs: o.roots, WriteThrough: true}
	remote, resp, err := bytestream.DialWebSocket(ctx, u, wsOpts)
	var he *bytestream.HandshakeError
	if direct && errors.As(err, &he) && he.StatusCode == http.StatusOK {
		// The host's direct addresses, not a relay.
		conn, derr := dialAnswer(ctx, stderr, he.Body, host, o)
		if derr == nil {
			say("direct session to %s, its agent's listener", conn.RemoteAddr())
			return sshGone(joinDirect(ctx, local, conn, memo, say))
		}
		if ctx.Err() == nil {
			memo.failed(derr)
		}
		say("no direct session (%v); through the gateway's relay", derr)
		h.Del(wire.HeaderDirect)
		h.Set(wire.HeaderDirectFailed, wire.DirectFailedValue(derr))
		remote, resp, err = bytestream.DialWebSocket(ctx, u, wsOpts)
	} else if err == nil && direct {
		say(sayNoDirectAddress)
	} else if err == nil && o.relayOnly {
		say("through the gateway's relay (--relay-only)")
	}
	if err != nil {
		return fail(proxyDialError(gw, host, err))
	}
	if o.knownHosts != "" {
		mendKnownHost(stderr, o.knownHosts, host, resp.Header.Get(wire.HeaderPinnedKey))
	}
	rc := &closeReasonConn{Conn: remote, stderr: stderr}
	_, err = bicopy.Copy(ctx, local, rc)
	if rc.said {
		return reportedError{err}
	}
	return sshGone(err)
}

// proxySay is the proxy's --verbose: what it says of host's path on
// stderr.
func proxySay(stderr io.Writer, host string, o proxyOptions) func(format string, args ...any) {
	return func(format string, args ...any) {
		if o.verbose {
			fmt.Fprintf(stderr, "gateway: host %s: %s\n", host, printable(fmt.Sprintf(format, args...)))
		}
	}
}

// sayNoDirectAddress is --verbose's word for a host the gateway gave no
// direct address for.
const sayNoDirectAddress = "through the gateway's relay: the host published no direct address (agent connect --direct), or the gateway offers none"

// dialAnswer dials the direct address the gateway's answer (body) gives
// for host, after mending --known-hosts by the key it names.
func dialAnswer(ctx context.Context, stderr io.Writer, body, host string, o proxyOptions) (net.Conn, error) {
	answer, pinned, err := wire.ParseDirectAnswer([]byte(body))
	if err != nil {
		return nil, err
	}
	if o.knownHosts != "" {
		mendKnownHost(stderr, o.knownHosts, host, answer.HostPublicKey)
	}
	return dialDirect(ctx, answer, pinned)
}

// envDirectFailed carries why --fdpass's direct path failed to the
// relay it starts, which tells the gateway (wire.HeaderDirectFailed).
const envDirectFailed = "HOSTGATE_PROXY_DIRECT_FAILED"

// checkProxyURL refuses a --url the proxy cannot dial, saying why without
// quoting it: what stands before an '@' in it may be a token, which
// bytestream's and url.Parse's errors quoted into ssh's stderr (a
// terminal, a CI job's log).
func checkProxyURL(gw string) error {
	const want = "give the gateway's base URL, as https://gw.example.com"
	u, err := url.Parse(gw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return fmt.Errorf("proxy: --url is not a URL (%v): %s", err, want)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "ws", "wss":
	default:
		// Not quoted: "TOKEN:x@gw" parses as scheme TOKEN.
		return fmt.Errorf("proxy: --url does not begin with https://, http://, wss:// or ws://: %s", want)
	}
	if u.User != nil {
		return errors.New("proxy: --url holds credentials (before an '@'), which the proxy does not send: give the token by --token or HOSTGATE_TOKEN, and the URL without them")
	}
	if u.Host == "" {
		return fmt.Errorf("proxy: --url names no host: %s", want)
	}
	return nil
}

// proxyRequest is the URL and headers of the proxy's request for host's
// SSH stream.
func proxyRequest(gw, token, host string, o proxyOptions) (string, http.Header, error) {
	u, err := url.Parse(strings.TrimRight(gw, "/"))
	if err != nil {
		return "", nil, fmt.Errorf("proxy: --url: %w", err)
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/v1/hosts/" + url.PathEscape(host) + "/ssh"
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	if o.knownHosts != "" {
		h.Set(wire.HeaderPinnedKey, "1")
	}
	return u.String(), h, nil
}

// proxyDialError says why the gateway at gw refused the proxy's request,
// in its own words where it gave some.
func proxyDialError(gw, host string, err error) error {
	var he *bytestream.HandshakeError
	if errors.As(err, &he) {
		if we, ok := wire.ParseError([]byte(he.Body)); ok {
			return fmt.Errorf("proxy: host %s: %s (%d %s)", host, wire.TrimHost(host, we.Message), he.StatusCode, we.Code)
		}
		return fmt.Errorf("proxy: host %s: %s", host, wire.ForeignAnswer(he.StatusCode, he.Body))
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		// The dial's words name the refusal, not what is wrong: a
		// gateway not running, or a --url with the wrong port.
		err = fmt.Errorf("%w (no gateway answers at %s: is it running, and is that its URL? --url or HOSTGATE_URL)", err, strings.TrimRight(gw, "/"))
	}
	return fmt.Errorf("proxy: host %s: %w", host, tlshint.Wrap(err))
}

// sshGone is the join's error, but none for ssh gone: a broken stdout is
// ssh closing the pipe when it is done, and it may do so with the host's
// last bytes still on their way.
func sshGone(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, syscall.EPIPE) {
		return nil
	}
	return err
}

// closeReasonConn is the gateway's end of the proxy. When the gateway
// ends the relay with a reason (the host's agent disconnected, the token
// was revoked, the gateway is stopping), the read that meets it prints the
// reason before stdout closes: ssh, which then exits and hangs up, would
// show only "Connection closed by UNKNOWN port 65535".
type closeReasonConn struct {
	net.Conn
	stderr io.Writer
	said   bool // the reason was printed; read after bicopy.Copy, whose one reader of the conn set it
}

func (c *closeReasonConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	var ce *bytestream.CloseError
	if err != nil && errors.As(err, &ce) && ce.Reason != "" && !c.said {
		c.said = true
		fmt.Fprintf(c.stderr, "gateway: connection lost: %s\n", printable(ce.Reason))
	}
	return n, err
}

// mendKnownHost makes pinned host's line in the known_hosts file at path
// when the file names host with another key (or with several). A file
// without a line for host is left alone: whoever set it up chose not to
// keep one there. An older gateway sends no key (pinned empty): nothing
// to do. Failures are reported, not fatal: ssh then says what it finds.
func mendKnownHost(stderr io.Writer, path, host, pinned string) {
	pinned = strings.TrimSpace(pinned)
	if pinned == "" {
		return
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(pinned))
	if err != nil {
		return
	}
	pinned = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))) // the key alone, as known_hosts holds it
	named, current, err := knownHostLine(path, host, pinned)
	if err != nil || !named || current {
		return
	}
	if err := pinKnownHost(path, host, pinned); err != nil {
		fmt.Fprintf(stderr, "gateway: host %s: the gateway pins host key %s; updating --known-hosts %s: %v\n", host, ssh.FingerprintSHA256(pub), path, err)
		return
	}
	fmt.Fprintf(stderr, "gateway: host %s: the gateway now pins host key %s (reset since it was written); --known-hosts %s updated\n", host, ssh.FingerprintSHA256(pub), path)
}
