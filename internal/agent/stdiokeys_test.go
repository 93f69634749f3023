package agent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// stdioKeysFixture is a host key, a CA and a user certificate for host id
// "exec-1" signed by that CA.
type stdioKeysFixture struct {
	keys    StdioKeys
	hostPub ssh.PublicKey
	ca      ssh.Signer
}

func newStdioKeysFixture(t testing.TB) stdioKeysFixture {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	hs, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	ca := serveKey(t)
	return stdioKeysFixture{
		keys: StdioKeys{
			HostKey:    string(pem.EncodeToMemory(block)),
			TrustedCAs: []string{string(ssh.MarshalAuthorizedKey(ca.PublicKey()))},
			HostID:     "exec-1",
			Dir:        t.TempDir(),
		},
		hostPub: hs.PublicKey(),
		ca:      ca,
	}
}

// certSigner returns a user key certified by ca for principal.
func certSigner(t testing.TB, ca ssh.Signer, principal string) ssh.Signer {
	t.Helper()
	user := serveKey(t)
	cert := &ssh.Certificate{
		Key: user.PublicKey(), CertType: ssh.UserCert, KeyId: "test",
		ValidPrincipals: []string{principal},
		ValidAfter:      uint64(time.Now().Add(-time.Minute).Unix()),
		ValidBefore:     uint64(time.Now().Add(time.Hour).Unix()),
	}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewCertSigner(cert, user)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStdioKeysRoundTripLeavesTheRestUnread(t *testing.T) {
	fx := newStdioKeysFixture(t)
	fx.keys.LeaveBackground = true
	var buf bytes.Buffer
	if err := WriteStdioKeys(&buf, fx.keys); err != nil {
		t.Fatal(err)
	}
	buf.WriteString("yamux follows")
	got, err := ReadStdioKeys(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if got.HostID != fx.keys.HostID || got.HostKey != fx.keys.HostKey || len(got.TrustedCAs) != 1 || got.Dir != fx.keys.Dir || !got.LeaveBackground {
		t.Fatalf("round trip: %+v", got)
	}
	if rest, _ := io.ReadAll(&buf); string(rest) != "yamux follows" {
		t.Fatalf("preamble reader consumed too much: rest %q", rest)
	}
}

func TestStdioKeysRefusals(t *testing.T) {
	fx := newStdioKeysFixture(t)
	frame := func(body string) []byte {
		b := []byte(stdioKeysMagic)
		b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
		return append(b, body...)
	}
	huge := []byte(stdioKeysMagic)
	huge = binary.BigEndian.AppendUint32(huge, MaxStdioKeys+1)
	for name, in := range map[string][]byte{
		"empty":     nil,
		"bad magic": []byte("SSH-2.0-x\r\n"),
		"oversized": huge,
		"truncated": frame(`{"hostId":"x"}`)[:12],
		"not json":  frame("nope"),
	} {
		if _, err := ReadStdioKeys(bytes.NewReader(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, mut := range map[string]func(*StdioKeys){
		"no host key":  func(k *StdioKeys) { k.HostKey = "" },
		"no CA":        func(k *StdioKeys) { k.TrustedCAs = nil },
		"garbage CA":   func(k *StdioKeys) { k.TrustedCAs = []string{"ssh-ed25519 !!!"} },
		"CA option":    func(k *StdioKeys) { k.TrustedCAs = []string{`principals="root" ` + k.TrustedCAs[0]} },
		"two CAs":      func(k *StdioKeys) { k.TrustedCAs = []string{k.TrustedCAs[0] + "\n" + k.TrustedCAs[0]} },
		"no host id":   func(k *StdioKeys) { k.HostID = "" },
		"public as HK": func(k *StdioKeys) { k.HostKey = k.TrustedCAs[0] },
	} {
		k := fx.keys
		mut(&k)
		if _, _, err := k.parsed(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestRunServeKeysStdin runs `agent serve --stdio --mux --keys-stdin` as a
// gateway starts it in a container: the keys arrive first on the same
// stream, then yamux; a certificate for the host id gets a shell, one for
// another host does not, and the host key is the one sent.
func TestRunServeKeysStdin(t *testing.T) {
	fx := newStdioKeysFixture(t)
	// The preamble's MakeDirs are made before serving (a sandbox's TMPDIR).
	tmp := filepath.Join(t.TempDir(), "workspace", ".tmp")
	fx.keys.MakeDirs = []string{tmp}
	sess, _, _, end := keysAgent(t, fx.keys)
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	out := serveSSHExec(t, st, fx.hostPub, certSigner(t, fx.ca, "exec-1"), "pwd")
	if fi, err := os.Stat(tmp); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("the preamble's MakeDirs %s: %v %v, want a 0700 directory", tmp, fi, err)
	}
	if strings.TrimSpace(out) != fx.keys.Dir {
		t.Fatalf("pwd = %q, want the preamble's dir %q", out, fx.keys.Dir)
	}

	st2, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, err = ssh.NewClientConn(st2, "agent", &ssh.ClientConfig{
		User: "x", Auth: []ssh.AuthMethod{ssh.PublicKeys(certSigner(t, fx.ca, "other-host"))},
		HostKeyCallback: ssh.FixedHostKey(fx.hostPub), Timeout: serveWait,
	})
	if err == nil {
		t.Fatal("a certificate for another host id was accepted")
	}
	end()
}

func TestRunServeKeysStdinRefusesBadPreamble(t *testing.T) {
	gwSide, agentSide := serveTCPPair(t)
	defer func() { _ = gwSide.Close() }()
	var logs serveLogBuffer
	done := make(chan error, 1)
	go func() {
		done <- RunServe(context.Background(), []string{"--stdio", "--mux", "--keys-stdin"}, &ServeIO{Conn: agentSide, Stderr: &logs})
	}()
	if _, err := gwSide.Write([]byte("garbage!")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "magic") {
			t.Fatalf("RunServe with a bad preamble: %v", err)
		}
	case <-time.After(serveWait):
		t.Fatal("RunServe did not fail on a bad preamble")
	}
	if err := RunServe(context.Background(), []string{"--listen", "127.0.0.1:0", "--keys-stdin"}, &ServeIO{Stderr: &logs}); err == nil {
		t.Fatal("--keys-stdin without --stdio accepted")
	}
	for _, flag := range []string{"--authorized-keys", "--trusted-ca", "--trusted-ca-key", "--host-id", "--host-key", "--state-dir"} {
		err := RunServe(context.Background(), []string{"--stdio", "--keys-stdin", flag, "x"}, &ServeIO{Stderr: &logs})
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("--keys-stdin with %s: %v, want a refusal naming it", flag, err)
		}
	}
}

func FuzzReadStdioKeys(f *testing.F) {
	var buf bytes.Buffer
	_ = WriteStdioKeys(&buf, StdioKeys{HostKey: "k", TrustedCAs: []string{"ca"}, HostID: "h"})
	f.Add(buf.Bytes())
	f.Add([]byte("HGK1\x00\x00\x00\x02{}"))
	f.Add([]byte("HGK1\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, in []byte) {
		k, err := ReadStdioKeys(bytes.NewReader(in))
		if err != nil {
			return
		}
		_, _, _ = k.parsed() // must not panic
		if len(in) > 8<<10 {
			return // JSON escaping may grow a large one past the bound
		}
		var out bytes.Buffer
		if err := WriteStdioKeys(&out, k); err != nil {
			t.Fatalf("re-encode of an accepted preamble: %v", err)
		}
	})
}

func TestOverlayEnv(t *testing.T) {
	base := []string{"PATH=/usr/bin", "HOME=/tmp", "A=1"}
	got := overlayEnv(base, []string{"HOME=/workspace", "B=2", "A=3"})
	if want := []string{"PATH=/usr/bin", "HOME=/workspace", "A=3", "B=2"}; !slices.Equal(got, want) {
		t.Errorf("overlayEnv: %q, want %q", got, want)
	}
	if base[1] != "HOME=/tmp" {
		t.Errorf("base changed: %q", base)
	}
	if got := overlayEnv(nil, nil); got == nil || len(got) != 0 {
		t.Errorf("overlayEnv(nil, nil) = %#v, want an empty, non-nil environment (nil means a clean one)", got)
	}
}

// The command line's mode wins over the environment's: a sandbox's agent
// runs `serve --stdio --mux --keys-stdin` in the container's environment,
// which holds the provision's env, and HOSTGATE_LISTEN or
// HOSTGATE_AUTHORIZED_KEYS there made it refuse to start. Other variables
// still apply (HOSTGATE_LOG_FORMAT here).
func TestRunServeModeBeatsEnvironment(t *testing.T) {
	t.Setenv("HOSTGATE_LISTEN", "127.0.0.1:1")
	t.Setenv("HOSTGATE_AUTHORIZED_KEYS", filepath.Join(t.TempDir(), "missing"))
	t.Setenv("HOSTGATE_HOST_ID", "someone-else")
	t.Setenv("HOSTGATE_LOG_FORMAT", "json")
	fx := newStdioKeysFixture(t)
	sess, _, logs, end := keysAgent(t, fx.keys)
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	if out := serveSSHExec(t, st, fx.hostPub, certSigner(t, fx.ca, "exec-1"), "echo up"); strings.TrimSpace(out) != "up" {
		t.Fatalf("exec through the agent: %q", out)
	}
	end()
	if !strings.Contains(logs.String(), `"msg":"agent serving SSH over a multiplexed stdio tunnel"`) {
		t.Errorf("HOSTGATE_LOG_FORMAT=json was not applied:\n%s", logs.String())
	}

	// And the other way: --listen is not turned into a stdio agent by
	// HOSTGATE_STDIO.
	t.Setenv("HOSTGATE_STDIO", "true")
	t.Setenv("HOSTGATE_LISTEN", "")
	t.Setenv("HOSTGATE_LOG_FORMAT", "text") // the ready line is read from text
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte(ssh.MarshalAuthorizedKey(fx.hostPub)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var buf serveLogBuffer
	buf.ready = make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- RunServe(ctx, []string{"--listen", "127.0.0.1:0", "--authorized-keys", keys, "--state-dir", t.TempDir()}, &ServeIO{Stderr: &buf})
	}()
	select {
	case <-buf.ready:
	case err := <-done:
		t.Fatalf("serve --listen with HOSTGATE_STDIO set: %v", err)
	case <-time.After(serveWait):
		t.Fatal("serve --listen never listened")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
