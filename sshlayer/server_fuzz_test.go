//go:build unix

package sshlayer

import (
	"bytes"
	"crypto/rand"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/shell"
)

func FuzzParsePtyRequest(f *testing.F) {
	f.Add(ssh.Marshal(struct {
		Term                 string
		Cols, Rows, PxW, PxH uint32
		Modes                string
	}{"xterm-256color", 80, 24, 0, 0, "\x35\x00\x00\x00\x00\x00"}))
	f.Add([]byte{})
	f.Add([]byte("\x00\x00\x00\x05vt100\xff\xff\xff\xff\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parsePtyRequest(b)
		if err != nil {
			return
		}
		if p.Term == "" || len(p.Term) > maxTermLen || p.Cols == 0 || p.Rows == 0 {
			t.Fatalf("accepted %+v", p)
		}
		for _, c := range []byte(p.Term) {
			if c <= ' ' || c >= 0x7f || c == '=' {
				t.Fatalf("TERM %q holds %q", p.Term, c)
			}
		}
	})
}

func FuzzParseWindowChange(f *testing.F) {
	f.Add(ssh.Marshal(struct{ Cols, Rows, PxW, PxH uint32 }{132, 50, 0, 0}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := parseWindowChange(b)
		if err == nil && (w.Cols == 0 || w.Rows == 0) {
			t.Fatalf("zero size accepted: %+v", w)
		}
	})
}

// FuzzAuthenticate feeds arbitrary public keys and certificates to the
// authenticator: nothing that was not issued by the trusted CA or listed
// may pass, and nothing may panic.
func FuzzAuthenticate(f *testing.F) {
	ca, _, _ := newEd25519Signer()
	user, _, _ := newEd25519Signer()
	cert := &ssh.Certificate{Key: user.PublicKey(), CertType: ssh.UserCert, ValidPrincipals: []string{"h"}, ValidBefore: ssh.CertTimeInfinity}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		f.Fatal(err)
	}
	f.Add(user.PublicKey().Marshal())
	f.Add(cert.Marshal())
	authorized, _, _ := newEd25519Signer()
	a := newAuthenticator(&ServerConfig{AuthorizedKeys: []ssh.PublicKey{authorized.PublicKey()}, TrustedUserCAs: []ssh.PublicKey{ca.PublicKey()}, Principal: "h"}, "root")
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ssh.ParsePublicKey(b)
		if err != nil {
			return
		}
		perms, err := a.authenticate(nil, k)
		if err != nil {
			return
		}
		c, isCert := k.(*ssh.Certificate)
		switch {
		case !isCert && string(k.Marshal()) == string(authorized.PublicKey().Marshal()):
		case isCert && string(c.SignatureKey.Marshal()) == string(ca.PublicKey().Marshal()):
		default:
			t.Fatalf("accepted %s (%v)", k.Type(), perms)
		}
		// A certificate grants a PTY or forwarding (of ports or an agent)
		// only when it says so.
		for _, ext := range []string{extPermitPTY, extPermitPortForwarding, extPermitAgentForwarding} {
			_, granted := perms.Extensions[ext]
			if isCert {
				if _, inCert := c.Permissions.Extensions[ext]; granted && !inCert {
					t.Fatalf("%s granted to a certificate without it", ext)
				}
			} else if !granted {
				t.Fatalf("%s not granted to an authorized key", ext)
			}
		}
	})
}

func FuzzParseTTYModes(f *testing.F) {
	f.Add(ssh.Marshal(struct{ A, B byte }{53, 0})) // truncated
	f.Add([]byte{53, 0, 0, 0, 1, 1, 0, 0, 0, 3, 0})
	f.Add([]byte{200, 1, 2, 3, 4, 53, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		modes := parseTTYModes(b)
		if len(modes) > maxTTYModes || len(modes)*5 > len(b) {
			t.Fatalf("%d modes from %d bytes", len(modes), len(b))
		}
		for i, m := range modes {
			if m.Op == 0 || m.Op >= 160 || b[5*i] != m.Op {
				t.Fatalf("mode %d: %+v", i, m)
			}
		}
	})
}

// FuzzParseExec: an exec request's command is the string the client sent,
// byte for byte (it is what the audit log and the shell get).
func FuzzParseExec(f *testing.F) {
	f.Add(ssh.Marshal(struct{ Command string }{"uname -a"}))
	f.Add(ssh.Marshal(struct{ Command string }{""}))
	f.Add(ssh.Marshal(struct{ Command string }{"cd '/tmp' && exec 'ls' '-l'"}))
	f.Add([]byte("\x00\x00\x00\x09uname -a\x00")) // trailing byte
	f.Add([]byte("\xff\xff\xff\xffls"))           // length beyond the payload
	f.Fuzz(func(t *testing.T, b []byte) {
		cmd, err := parseExec(b)
		if err != nil {
			return
		}
		if got := ssh.Marshal(struct{ Command string }{cmd}); !bytes.Equal(got, b) {
			t.Fatalf("command %q re-encodes as %x, sent %x", cmd, got, b)
		}
	})
}

// FuzzParseSubsystem: the name is the string the client sent; only "sftp"
// starts anything, and it must be exactly that.
func FuzzParseSubsystem(f *testing.F) {
	f.Add(ssh.Marshal(struct{ Name string }{"sftp"}))
	f.Add(ssh.Marshal(struct{ Name string }{"sftp\x00"}))
	f.Add(ssh.Marshal(struct{ Name string }{"netconf"}))
	f.Add([]byte("\x00\x00\x00\x04sft"))
	f.Fuzz(func(t *testing.T, b []byte) {
		name, err := parseSubsystem(b)
		if err != nil {
			return
		}
		if got := ssh.Marshal(struct{ Name string }{name}); !bytes.Equal(got, b) {
			t.Fatalf("name %q re-encodes as %x, sent %x", name, got, b)
		}
	})
}

// FuzzParseSignal: a signal request delivers only a signal of the table,
// the one it names; anything else is refused with an error.
func FuzzParseSignal(f *testing.F) {
	for _, n := range []string{"INT", "TERM", "KILL", "WINCH", "SIGINT", "int", "", "INT\x00"} {
		f.Add(ssh.Marshal(struct{ Signal string }{n}))
	}
	f.Add([]byte("\x00\x00\x00\x03INTx"))
	f.Fuzz(func(t *testing.T, b []byte) {
		sig, err := parseSignal(b)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("refusal without a message")
			}
			return
		}
		name := signalName(sig)
		if name == "" || srvSignals[name] != sig {
			t.Fatalf("delivered %v, not in the table", sig)
		}
		if got := ssh.Marshal(struct{ Signal string }{name}); !bytes.Equal(got, b) {
			t.Fatalf("delivered %s for %x", name, b)
		}
	})
}

// FuzzSetEnv sends a session a run of env requests (b split into payloads
// by 2-byte lengths, sent rounds times): every variable accepted is the
// name and value sent, with a name a shell could export and a value a
// process can be started with, and the session's
// bounds hold however many arrive.
func FuzzSetEnv(f *testing.F) {
	frame := func(ps ...[]byte) []byte {
		var out []byte
		for _, p := range ps {
			out = append(out, byte(len(p)>>8), byte(len(p)))
			out = append(out, p...)
		}
		return out
	}
	env := func(n, v string) []byte { return ssh.Marshal(struct{ Name, Value string }{n, v}) }
	f.Add(frame(env("LANG", "C.UTF-8"), env("LC_ALL", "")), uint16(1))
	f.Add(frame(env("BAD-NAME", "v"), env("1X", "v"), env("X=Y", "v")), uint16(1))
	f.Add(frame(env("A", strings.Repeat("x", 4000))), uint16(40))
	f.Add(frame(env("A", "1"), env("B", "2")), uint16(300))
	f.Add(frame([]byte("\x00\x00\x00\x01A\x00\x00\x00\x01")), uint16(1))
	f.Fuzz(func(t *testing.T, b []byte, rounds uint16) {
		var payloads [][]byte
		for len(b) >= 2 {
			n := min(int(b[0])<<8|int(b[1]), len(b)-2)
			payloads = append(payloads, b[2:2+n])
			b = b[2+n:]
		}
		s := &session{}
		for range int(rounds%400) + 1 {
			// A round that accepts nothing leaves the session as it was,
			// so every later round would repeat it: stop there. Replaying
			// them made each exec take milliseconds (1297 execs in 40 s).
			accepted := false
			for _, p := range payloads {
				before := len(s.env)
				ok := s.setEnv(p)
				accepted = accepted || ok
				if !ok {
					if len(s.env) != before {
						t.Fatal("a refused env request changed the environment")
					}
					continue
				}
				if len(s.env) != before+1 {
					t.Fatalf("accepted, %d variables became %d", before, len(s.env))
				}
				var m struct{ Name, Value string }
				if err := ssh.Unmarshal(p, &m); err != nil {
					t.Fatalf("accepted malformed %x", p)
				}
				if !shell.ValidName(m.Name) || s.env[before] != m.Name+"="+m.Value {
					t.Fatalf("accepted %q for %x", s.env[before], p)
				}
				// No process can be started with a NUL in its environment.
				if strings.IndexByte(m.Value, 0) >= 0 {
					t.Fatalf("accepted %q, which no command can start with", s.env[before])
				}
			}
			if !accepted {
				break
			}
		}
		total := 0
		for _, kv := range s.env {
			total += len(kv) - 1
		}
		if len(s.env) > maxSessionEnv || total > maxEnvBytes || total != s.envBytes {
			t.Fatalf("%d variables of %d bytes (counted %d)", len(s.env), total, s.envBytes)
		}
		s.started = true
		if s.setEnv(ssh.Marshal(struct{ Name, Value string }{"LATE", "v"})) {
			t.Fatal("env accepted after the command started")
		}
	})
}

// FuzzParseDirectTCPIP: the agent connects to the host and port the client
// named, or to nothing: the target never reads as another address.
func FuzzParseDirectTCPIP(f *testing.F) {
	f.Add(ssh.Marshal(directTCPIPMsg{"127.0.0.1", 8080, "127.0.0.1", 50000}))
	f.Add(ssh.Marshal(directTCPIPMsg{"::1", 22, "", 0}))
	f.Add(ssh.Marshal(directTCPIPMsg{"localhost", 70000, "", 0}))
	f.Add(ssh.Marshal(directTCPIPMsg{"a]:80", 22, "", 0}))
	f.Add(ssh.Marshal(directTCPIPMsg{"fe80::1%eth0", 443, "", 0}))
	f.Add([]byte("\x00\x00\x00\x09localhost\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		target, err := parseDirectTCPIP(b)
		if err != nil {
			return
		}
		var m directTCPIPMsg
		if err := ssh.Unmarshal(b, &m); err != nil || m.Port > 65535 {
			t.Fatalf("accepted %x (%+v, %v)", b, m, err)
		}
		host, port, err := net.SplitHostPort(target)
		if err != nil {
			return // no dial can reach it either
		}
		if host != m.Host || port != strconv.FormatUint(uint64(m.Port), 10) {
			t.Fatalf("asked for %q port %d, target %q", m.Host, m.Port, target)
		}
	})
}

// FuzzTCPIPForward: a forward listens on the port asked, and on loopback
// unless the server allows remote binds; two forwards have one key (which
// a cancel finds them by) only when they asked for the same address and
// port.
func FuzzTCPIPForward(f *testing.F) {
	other := ssh.Marshal(tcpipForwardMsg{"localhost", 8080})
	for _, a := range []string{"", "localhost", "127.0.0.1", "::1", "0.0.0.0", "*", "::ffff:127.0.0.1", "10.0.0.1", "::1%lo", "[::1]", "[000]", "127.0.0.1:80", "localhost:8080"} {
		f.Add(ssh.Marshal(tcpipForwardMsg{a, 8080}), other)
	}
	f.Add(ssh.Marshal(tcpipForwardMsg{"localhost", 0}), other)
	f.Add(ssh.Marshal(tcpipForwardMsg{"localhost", 65536}), other)
	f.Add([]byte("\x00\x00\x00\x01*\x00\x00"), other)
	local := &serverConn{srv: &Server{}}
	remote := &serverConn{srv: &Server{cfg: ServerConfig{AllowRemoteBind: true}}}
	f.Fuzz(func(t *testing.T, b, b2 []byte) {
		m, err := parseTCPIPForward(b)
		if err != nil {
			return
		}
		if m.Port > 65535 || !bytes.Equal(ssh.Marshal(m), b) {
			t.Fatalf("accepted %+v for %x", m, b)
		}
		bind := local.bindAddr(m.Addr)
		if ip := net.ParseIP(bind); ip == nil || !ip.IsLoopback() {
			t.Fatalf("%q binds %q without AllowRemoteBind", m.Addr, bind)
		}
		if a := remote.bindAddr(m.Addr); a != "" && a != m.Addr && a != "127.0.0.1" {
			t.Fatalf("%q binds %q with AllowRemoteBind", m.Addr, a)
		}
		if m2, err := parseTCPIPForward(b2); err == nil && forwardKey(m.Addr, m.Port) == forwardKey(m2.Addr, m2.Port) && m != m2 {
			t.Fatalf("forwards %+v and %+v share the key %q", m, m2, forwardKey(m.Addr, m.Port))
		}
	})
}

// FuzzParseStreamLocal: a Unix-socket forward connects to or listens on
// the path the client named, never an empty one or one with a NUL, and its
// key is never a TCP forward's.
func FuzzParseStreamLocal(f *testing.F) {
	f.Add(ssh.Marshal(struct {
		Path, Reserved string
		Reserved2      uint32
	}{"/var/run/docker.sock", "", 0}), []byte("\x00\x00\x00\x04unix\x00\x00\x00\x7b"))
	f.Add(ssh.Marshal(struct{ Path string }{"/tmp/x.sock"}), []byte(nil))
	f.Add(ssh.Marshal(struct{ Path string }{"123"}), ssh.Marshal(tcpipForwardMsg{"unix", 123}))
	f.Add([]byte("\x00\x00\x00\x00"), []byte(nil))
	f.Add([]byte("\x00\x00\x00\x03a\x00b"), []byte(nil))
	f.Fuzz(func(t *testing.T, b, tcp []byte) {
		for _, parse := range []func([]byte) (string, error){parseDirectStreamLocal, parseStreamLocalForward} {
			path, err := parse(b)
			if err != nil {
				continue
			}
			var m struct{ Path string }
			if path == "" || path[0] == '@' || strings.IndexByte(path, 0) >= 0 || ssh.Unmarshal(b[:4+len(path)], &m) != nil || m.Path != path {
				t.Fatalf("accepted %q from %x", path, b)
			}
			if tm, err := parseTCPIPForward(tcp); err == nil && strings.IndexByte(tm.Addr, 0) < 0 && forwardKey(tm.Addr, tm.Port) == streamLocalKey(path) {
				t.Fatalf("socket %q and TCP forward %+v share a key", path, tm)
			}
		}
	})
}
