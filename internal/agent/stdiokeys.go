package agent

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/sshlayer"
)

// The keys preamble is how a gateway hands an agent it starts inside a
// container (`agent serve --stdio --mux --keys-stdin`) its host key, the
// CA it trusts and its host id: over the same stdin that then carries
// yamux, never through argv, environment or a file other users of the
// container could read. Its frame is the magic "HGK1", a big-endian
// uint32 length and that many bytes of JSON (StdioKeys).
const (
	stdioKeysMagic = "HGK1"
	// MaxStdioKeys bounds the preamble's JSON: a host key, a few CA keys
	// and an id fit in a few KiB, and Env in what a provision env may
	// hold (256 values of up to 32 KiB).
	MaxStdioKeys = 16 << 20
)

// StdioKeys is the preamble's content.
type StdioKeys struct {
	// HostKey is the agent's host private key in OpenSSH PEM form.
	HostKey string `json:"hostKey"`
	// TrustedCAs are the user CA public keys, authorized_keys form.
	TrustedCAs []string `json:"trustedCAs"`
	// HostID is the principal user certificates must carry.
	HostID string `json:"hostId"`
	// Dir is the working directory of commands and SFTP (the container's
	// /workspace); empty means the server's default.
	Dir string `json:"dir,omitempty"`
	// LeaveBackground: what a command starts in the background outlives
	// it, as under docker exec (sshlayer.ServerConfig.LeaveBackground).
	// Sandbox containers set it: terminating the container ends all.
	LeaveBackground bool `json:"leaveBackground,omitempty"`
	// ChildOOMScoreAdj raises every command's oom_score_adj
	// (sshlayer.ServerConfig.ChildOOMScoreAdj): a sandbox's memory limit
	// run out took the agent, the largest process, with every command's
	// channel, and left the memory hog running.
	ChildOOMScoreAdj int `json:"childOOMScoreAdj,omitempty"`
	// KeepTasks: commands are held to the container's soft nproc ulimit,
	// below its pids limit, and the agent raises its own to the hard one
	// (keepTasks): commands that took every pid left the agent unable to
	// make a thread it needed.
	KeepTasks bool `json:"keepTasks,omitempty"`
	// InheritEnv: commands start from this process's environment (a
	// container's: the image's, the provision env, HOME, TMPDIR), as under
	// docker exec, with Env over it; without it, from a clean one
	// (sshlayer.ServerConfig.Env). The keys never pass through the
	// environment, so it holds nothing of the agent's.
	InheritEnv bool `json:"inheritEnv,omitempty"`
	// MakeDirs are made (mode 0700, with parents) when missing, before
	// serving: a sandbox's TMPDIR in its workspace. Failing is logged, not
	// fatal: commands run without it.
	MakeDirs []string `json:"makeDirs,omitempty"`
	// Env (NAME=value) is set over the inherited environment: a pooled
	// container's provision env, which its agent, started before the
	// claim, did not start with.
	Env []string `json:"env,omitempty"`
	// CallerPreamble, wire.CallerPreambleProxyV1, offers a caller
	// preamble at the start of every stream (internal/proxyproto). An
	// agent that reads them (with --mux) answers CallerPreambleAck on
	// stdout before the multiplexer's first byte, and the gateway then
	// writes them; an older agent ignores the field and answers nothing,
	// and gets none (ReadCallerAck).
	CallerPreamble string `json:"callerPreamble,omitempty"`
	// ReportPID asks the agent (with --mux) for its pid, as its own pid
	// namespace (the container's) numbers it: it answers PIDAck and the
	// pid before anything else on stdout. Sandbox code may stop its agent
	// (kill -STOP); the gateway then kills that process, by its pid, and
	// no other of the same name. An older agent ignores the field and
	// answers nothing (ReadStdioAcks).
	ReportPID bool `json:"reportPid,omitempty"`
}

// CallerPreambleAck is what a stdio agent writes before the multiplexer
// when it reads the caller preambles its keys offered. A yamux frame
// starts with its version, 0: the ack's first byte tells them apart.
const CallerPreambleAck = "HGC1"

// PIDAck is what a stdio agent whose keys asked for its pid
// (StdioKeys.ReportPID) writes first, followed by its pid as a big-endian
// uint32; before the CallerPreambleAck, if any.
const PIDAck = "HGP1"

// ackConn is the gateway's end of a stdio tunnel whose keys asked for
// acks: its first Read takes the agent's acks, if its first bytes are
// some, and passes anything else on.
type ackConn struct {
	net.Conn
	checked bool        // the first bytes were looked at; the session's reader only
	acked   atomic.Bool // they held CallerPreambleAck
	pid     atomic.Int64
}

func (c *ackConn) Read(p []byte) (int, error) {
	if c.checked || len(p) == 0 {
		return c.Conn.Read(p)
	}
	c.checked = true
	for range 2 { // PIDAck, then CallerPreambleAck, each if sent
		var b [len(CallerPreambleAck)]byte
		if _, err := io.ReadFull(c.Conn, b[:1]); err != nil {
			return 0, err
		}
		if b[0] != CallerPreambleAck[0] {
			p[0] = b[0] // the multiplexer's first byte
			return 1, nil
		}
		if _, err := io.ReadFull(c.Conn, b[1:]); err != nil {
			return 0, fmt.Errorf("agent: ack: %w", err)
		}
		switch string(b[:]) {
		case CallerPreambleAck:
			c.acked.Store(true)
			return c.Conn.Read(p)
		case PIDAck:
			if c.pid.Load() != 0 {
				return 0, errors.New("agent: ack: a second pid")
			}
			var pid [4]byte
			if _, err := io.ReadFull(c.Conn, pid[:]); err != nil {
				return 0, fmt.Errorf("agent: pid ack: %w", err)
			}
			n := binary.BigEndian.Uint32(pid[:])
			if n == 0 || n > maxPID {
				return 0, fmt.Errorf("agent: pid ack: pid %d out of range", n)
			}
			c.pid.Store(int64(n))
		default:
			return 0, fmt.Errorf("agent: ack: got %q, want %q or %q", b[:], PIDAck, CallerPreambleAck)
		}
	}
	return c.Conn.Read(p)
}

// maxPID is Linux's PID_MAX_LIMIT, the most pid_max may be.
const maxPID = 1 << 22

// StdioAcks says what a stdio agent answered its keys (ReadStdioAcks),
// once it has sent anything (its answer to the session's first ping).
type StdioAcks struct{ c *ackConn }

// Callers reports whether the agent answered CallerPreambleAck, so that
// the gateway writes a preamble on every stream (gateway.CallerTunnel),
// or none.
func (a StdioAcks) Callers() bool { return a.c.acked.Load() }

// PID is the pid the agent reported (PIDAck), 0 if none.
func (a StdioAcks) PID() int { return int(a.c.pid.Load()) }

// ReadStdioAcks wraps conn, the gateway's end of a stdio tunnel whose keys
// offered caller preambles or asked for the pid, for the multiplexer; acks
// tells what the agent answered.
func ReadStdioAcks(conn net.Conn) (wrapped net.Conn, acks StdioAcks) {
	c := &ackConn{Conn: conn}
	return c, StdioAcks{c}
}

// ReadCallerAck is ReadStdioAcks for a tunnel whose keys offered caller
// preambles only; acked is StdioAcks.Callers.
func ReadCallerAck(conn net.Conn) (wrapped net.Conn, acked func() bool) {
	c, acks := ReadStdioAcks(conn)
	return c, acks.Callers
}

// WriteStdioKeys writes k as a keys preamble to w.
func WriteStdioKeys(w io.Writer, k StdioKeys) error {
	b, err := json.Marshal(k)
	if err != nil {
		return fmt.Errorf("agent: keys preamble: %w", err)
	}
	if len(b) > MaxStdioKeys {
		return fmt.Errorf("agent: keys preamble: %d bytes, over %d", len(b), MaxStdioKeys)
	}
	buf := make([]byte, 0, 8+len(b))
	buf = append(buf, stdioKeysMagic...)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(b)))
	buf = append(buf, b...)
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("agent: write keys preamble: %w", err)
	}
	return nil
}

// ReadStdioKeys reads exactly one keys preamble from r, and not a byte
// more: what follows belongs to the multiplexer.
func ReadStdioKeys(r io.Reader) (StdioKeys, error) {
	var k StdioKeys
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return k, fmt.Errorf("agent: read keys preamble: %w", err)
	}
	if string(hdr[:4]) != stdioKeysMagic {
		return k, errors.New("agent: keys preamble: bad magic (is the gateway sending keys on stdin?)")
	}
	n := binary.BigEndian.Uint32(hdr[4:])
	if n > MaxStdioKeys {
		return k, fmt.Errorf("agent: keys preamble: %d bytes, over %d", n, MaxStdioKeys)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return k, fmt.Errorf("agent: read keys preamble: %w", err)
	}
	if err := json.Unmarshal(b, &k); err != nil {
		return k, fmt.Errorf("agent: keys preamble: %w", err)
	}
	return k, nil
}

// parsed checks the preamble and returns the host signer and the CA keys.
func (k StdioKeys) parsed() (ssh.Signer, []ssh.PublicKey, error) {
	hk, err := ssh.ParsePrivateKey([]byte(k.HostKey))
	if err != nil {
		return nil, nil, fmt.Errorf("agent: keys preamble: host key: %w", err)
	}
	if len(k.TrustedCAs) == 0 {
		return nil, nil, errors.New("agent: keys preamble: no trusted CA")
	}
	cas := make([]ssh.PublicKey, 0, len(k.TrustedCAs))
	for i, s := range k.TrustedCAs {
		// ParseKeys, like --trusted-ca-key: an option is refused, not
		// ignored.
		keys, err := ParseKeys([]byte(s))
		if err != nil || len(keys) != 1 {
			return nil, nil, fmt.Errorf("agent: keys preamble: trusted CA %d: want one public key without options", i)
		}
		cas = append(cas, keys[0])
	}
	if k.HostID == "" {
		return nil, nil, errors.New("agent: keys preamble: no host id")
	}
	return hk, cas, nil
}

// stdioKeysServer reads the keys preamble from conn and builds the SSH
// server it describes; environ is what InheritEnv passes on. The host key
// lives only in this process's memory. callers reports whether the keys
// offered caller preambles.
func stdioKeysServer(conn io.Reader, environ []string, log *slog.Logger) (srv *sshlayer.Server, callers, reportPID bool, err error) {
	if err := protectKeys(); err != nil {
		return nil, false, false, err
	}
	k, err := ReadStdioKeys(conn)
	if err != nil {
		return nil, false, false, err
	}
	hk, cas, err := k.parsed()
	if err != nil {
		return nil, false, false, err
	}
	for _, d := range k.MakeDirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			log.Warn("keys preamble: make directory", "dir", d, "err", err)
		}
	}
	var childTasks *sshlayer.TaskLimit
	if k.KeepTasks {
		childTasks = keepTasks(log)
	}
	var env []string
	if k.InheritEnv {
		env = overlayEnv(environ, k.Env)
	}
	srv, err = sshlayer.NewServer(&sshlayer.ServerConfig{
		HostKey:          hk,
		TrustedUserCAs:   cas,
		Principal:        k.HostID,
		Dir:              k.Dir,
		Env:              env,
		LeaveBackground:  k.LeaveBackground,
		ChildOOMScoreAdj: k.ChildOOMScoreAdj,
		ChildTasks:       childTasks,
		Logger:           log,
		// Never a forwarded agent in a sandbox: it would sign, as the
		// caller, for whatever untrusted code runs there.
		AgentForwarding: false,
	})
	return srv, k.CallerPreamble == wire.CallerPreambleProxyV1, k.ReportPID, err
}

// overlayEnv returns base with each NAME=value of over set, in place when
// base has NAME, else at the end.
func overlayEnv(base, over []string) []string {
	env := slices.Clone(base)
	if env == nil {
		env = []string{}
	}
	index := make(map[string]int, len(env))
	for i, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		index[name] = i
	}
	for _, kv := range over {
		name, _, _ := strings.Cut(kv, "=")
		if i, ok := index[name]; ok {
			env[i] = kv
			continue
		}
		index[name] = len(env)
		env = append(env, kv)
	}
	return env
}
