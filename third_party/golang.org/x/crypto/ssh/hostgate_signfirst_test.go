package ssh

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
)

func signFirstSigner(t *testing.T) Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// takesOnly is a server config that takes want's key alone.
func takesOnly(want PublicKey) *ServerConfig {
	return &ServerConfig{
		PublicKeyCallback: func(_ ConnMetadata, key PublicKey) (*Permissions, error) {
			if bytes.Equal(key.Marshal(), want.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("not this key")
		},
	}
}

// signFirstLogin runs a handshake with a server of srvCfg (given a host
// key here), and returns the methods the server logged, in order, and the
// client's error.
func signFirstLogin(t *testing.T, cfg *ClientConfig, srvCfg *ServerConfig) ([]string, error) {
	t.Helper()
	var mu sync.Mutex
	var logged []string
	srvCfg.AuthLogCallback = func(_ ConnMetadata, method string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			method += " refused"
		}
		logged = append(logged, method)
	}
	srvCfg.AddHostKey(signFirstSigner(t))
	a, b := testConnPair(t)
	served := make(chan struct{})
	go func() {
		defer close(served)
		if sc, chans, reqs, err := NewServerConn(a, srvCfg); err == nil {
			go DiscardRequests(reqs)
			go func() {
				for nc := range chans {
					_ = nc.Reject(Prohibited, "")
				}
			}()
			_ = sc.Wait()
		}
	}()
	cfg.HostKeyCallback = InsecureIgnoreHostKey()
	cfg.User = "u"
	c, chans, reqs, err := NewClientConn(b, "pipe", cfg)
	if err == nil {
		go DiscardRequests(reqs)
		go func() {
			for nc := range chans {
				_ = nc.Reject(Prohibited, "")
			}
		}()
		_ = c.Close()
	}
	_ = b.Close()
	<-served
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(logged), err
}

// testConnPair is a loopback TCP connection's two ends, closed at the
// test's end: not net.Pipe, as both ends of SSH write their version first.
func testConnPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a, b
}

// TestHostgateClientSignFirst: with SignFirst the client's first request
// is its key's, signed: the server hears no "none" and answers no query.
// Without it, upstream's "none" comes first.
func TestHostgateClientSignFirst(t *testing.T) {
	key := signFirstSigner(t)
	logged, err := signFirstLogin(t, &ClientConfig{Auth: []AuthMethod{PublicKeys(key)}, SignFirst: true}, takesOnly(key.PublicKey()))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(logged, []string{"publickey"}) {
		t.Errorf("SignFirst: the server logged %q, want one publickey request", logged)
	}
	logged, err = signFirstLogin(t, &ClientConfig{Auth: []AuthMethod{PublicKeys(key)}}, takesOnly(key.PublicKey()))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(logged, []string{"none refused", "publickey"}) {
		t.Errorf("without SignFirst: the server logged %q, want none then publickey", logged)
	}
}

// TestHostgateClientSignFirstRefused: a key the server refuses is an
// authentication error naming publickey, and a second key after it is
// tried signed.
func TestHostgateClientSignFirstRefused(t *testing.T) {
	refused, taken := signFirstSigner(t), signFirstSigner(t)
	logged, err := signFirstLogin(t, &ClientConfig{Auth: []AuthMethod{PublicKeys(refused)}, SignFirst: true}, takesOnly(taken.PublicKey()))
	if err == nil || !strings.Contains(err.Error(), "unable to authenticate") || !strings.Contains(err.Error(), "publickey") {
		t.Errorf("a refused key: %v, want an authentication error naming publickey", err)
	}
	if !slices.Equal(logged, []string{"publickey refused", "none refused"}) {
		t.Errorf("a refused key: the server logged %q, want the key, then none", logged)
	}
	logged, err = signFirstLogin(t, &ClientConfig{Auth: []AuthMethod{PublicKeys(refused, taken)}, SignFirst: true}, takesOnly(taken.PublicKey()))
	if err != nil {
		t.Fatalf("the second key: %v", err)
	}
	if !slices.Equal(logged, []string{"publickey refused", "publickey"}) {
		t.Errorf("the second key: the server logged %q", logged)
	}
}

// TestHostgateClientSignFirstNone: a server that refuses the key but
// lets "none" in still lets a SignFirst client in, with "none" after its
// key.
func TestHostgateClientSignFirstNone(t *testing.T) {
	key := signFirstSigner(t)
	srvCfg := &ServerConfig{NoClientAuth: true, PublicKeyCallback: func(ConnMetadata, PublicKey) (*Permissions, error) {
		return nil, errors.New("no key is taken")
	}}
	logged, err := signFirstLogin(t, &ClientConfig{Auth: []AuthMethod{PublicKeys(key)}, SignFirst: true}, srvCfg)
	if err != nil {
		t.Fatalf("a server that lets none in: %v", err)
	}
	if !slices.Equal(logged, []string{"publickey refused", "none"}) {
		t.Errorf("the server logged %q, want the key, then none", logged)
	}
}

// recordingConn is a packetConn that answers every request with answer
// and keeps what was written.
type recordingConn struct {
	written [][]byte
	answer  func(req []byte) []byte
}

func (c *recordingConn) writePacket(p []byte) error {
	c.written = append(c.written, slices.Clone(p))
	return nil
}

func (c *recordingConn) readPacket() ([]byte, error) {
	return c.answer(c.written[len(c.written)-1]), nil
}

func (c *recordingConn) Close() error { return nil }

// TestHostgateSignedPublicKeyOneMessage: signedPublicKey writes one
// request, signed over the session, where publicKeyCallback writes a
// query first.
func TestHostgateSignedPublicKeyOneMessage(t *testing.T) {
	key := signFirstSigner(t)
	session := []byte("session id")
	answer := func(req []byte) []byte {
		var m publickeyAuthMsg
		if err := Unmarshal(req, &m); err != nil {
			t.Fatal(err)
		}
		if !m.HasSig {
			return Marshal(&userAuthPubKeyOkMsg{Algo: m.Algoname, PubKey: m.PubKey})
		}
		return []byte{msgUserAuthSuccess}
	}
	for _, c := range []struct {
		name   string
		method AuthMethod
		want   []bool // HasSig of each request
	}{
		{"signedPublicKey", signedPublicKey{cb: publicKeyCallback(func() ([]Signer, error) { return []Signer{key}, nil })}, []bool{true}},
		{"publicKeyCallback", PublicKeys(key), []bool{false, true}},
	} {
		conn := &recordingConn{answer: answer}
		ok, _, err := c.method.auth(session, "u", conn, rand.Reader, nil)
		if err != nil || ok != authSuccess {
			t.Fatalf("%s: %v, %v", c.name, ok, err)
		}
		var got []bool
		for _, p := range conn.written {
			var m publickeyAuthMsg
			if err := Unmarshal(p, &m); err != nil {
				t.Fatal(err)
			}
			got = append(got, m.HasSig)
			if !m.HasSig {
				continue
			}
			sig, rest, ok := parseSignatureBody(m.Sig[4:])
			if !ok || len(rest) != 0 {
				t.Fatalf("%s: the signature does not parse", c.name)
			}
			data := buildDataSignedForAuth(session, userAuthRequestMsg{User: "u", Service: serviceSSH, Method: "publickey"}, m.Algoname, m.PubKey)
			if err := key.PublicKey().Verify(data, sig); err != nil {
				t.Errorf("%s: the signature does not verify: %v", c.name, err)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: requests signed %v, want %v", c.name, got, c.want)
		}
	}
}

// TestHostgateSignAhead: signAhead sends the first key's request signed,
// and the method it returns reads that request's answer without sending
// another; an RSA key is left to the login, whose algorithm waits for the
// server's list.
func TestHostgateSignAhead(t *testing.T) {
	key := signFirstSigner(t)
	conn := &recordingConn{answer: func([]byte) []byte { return []byte{msgUserAuthSuccess} }}
	cb := publicKeyCallback(func() ([]Signer, error) { return []Signer{key}, nil })
	k, err := signAhead(cb, []byte("session id"), "u", conn, rand.Reader)
	if err != nil || !k.sent || len(conn.written) != 1 {
		t.Fatalf("signAhead: sent %v, %d requests written, %v", k.sent, len(conn.written), err)
	}
	var m publickeyAuthMsg
	if err := Unmarshal(conn.written[0], &m); err != nil || !m.HasSig {
		t.Fatalf("signAhead wrote %v (%v), want a signed publickey request", m, err)
	}
	if ok, _, err := k.auth([]byte("session id"), "u", conn, rand.Reader, nil); err != nil || ok != authSuccess {
		t.Fatalf("the answer: %v, %v", ok, err)
	}
	if len(conn.written) != 1 {
		t.Errorf("the login wrote %d requests after signAhead's, want none", len(conn.written)-1)
	}

	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaSigner, err := NewSignerFromKey(rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	conn = &recordingConn{}
	k, err = signAhead(publicKeyCallback(func() ([]Signer, error) { return []Signer{rsaSigner}, nil }), []byte("session id"), "u", conn, rand.Reader)
	if err != nil || k.sent || len(conn.written) != 0 {
		t.Errorf("an RSA key: sent %v, %d written, %v; want it left to the login", k.sent, len(conn.written), err)
	}
}
