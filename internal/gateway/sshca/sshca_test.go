package sshca

import (
	"crypto/ed25519"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/durable"
	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

func userKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadOrCreatePersistsAndRaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "ca_key")
	var (
		wg   sync.WaitGroup
		keys [4]string
	)
	for i := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ca, err := LoadOrCreate(path)
			if err != nil {
				t.Error(err)
				return
			}
			keys[i] = ca.AuthorizedKey()
		}()
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if k != keys[0] {
			t.Fatalf("concurrent creators disagree: %q vs %q", k, keys[0])
		}
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", st.Mode(), err)
	}
	again, err := LoadOrCreate(path)
	if err != nil || again.AuthorizedKey() != keys[0] {
		t.Fatalf("reload: %v", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreate(path); err == nil {
		t.Fatal("world-readable CA key accepted")
	}
}

func TestSignVerifies(t *testing.T) {
	ca, err := LoadOrCreate(filepath.Join(t.TempDir(), "ca_key"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca.now = func() time.Time { return now }
	pub := userKey(t)
	cert, err := ca.Sign(pub, "h1", "ci-token", 5*time.Minute, true)
	if err != nil {
		t.Fatal(err)
	}
	// Round trip through the wire form, as the agent sees it.
	parsed, _, _, _, err := ssh.ParseAuthorizedKey(ssh.MarshalAuthorizedKey(cert))
	if err != nil {
		t.Fatal(err)
	}
	cert = parsed.(*ssh.Certificate)
	if cert.KeyId != "ci-token" || len(cert.CriticalOptions) != 0 {
		t.Errorf("cert: keyid %q critical %v", cert.KeyId, cert.CriticalOptions)
	}
	// What ssh -t, -L/-R and -A need; no X11 forwarding.
	for _, ext := range []string{"permit-pty", "permit-port-forwarding", "permit-agent-forwarding"} {
		if _, ok := cert.Extensions[ext]; !ok {
			t.Errorf("%s missing", ext)
		}
	}
	if len(cert.Extensions) != 3 {
		t.Errorf("extensions %v, want only those three", cert.Extensions)
	}
	// For a host that forwards no agent, no agent forwarding.
	noAgent, err := ca.Sign(pub, "h1", "ci-token", 5*time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := noAgent.Extensions["permit-agent-forwarding"]; ok || len(noAgent.Extensions) != 2 {
		t.Errorf("extensions without agent forwarding %v, want permit-pty and permit-port-forwarding", noAgent.Extensions)
	}
	// A caller's certificate names its token for the gateway, which a
	// direct session's admission looks up again; the agent checks the
	// signature over it, so the id is the gateway's word.
	issued, err := ca.SignToken(pub, "h1", "ci-token", "tok-7", 5*time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	parsed, _, _, _, err = ssh.ParseAuthorizedKey(ssh.MarshalAuthorizedKey(issued))
	if err != nil {
		t.Fatal(err)
	}
	if got := parsed.(*ssh.Certificate).Extensions[wire.CertTokenExtension]; got != "tok-7" || len(issued.Extensions) != 3 {
		t.Errorf("extensions of a token's certificate %v, want %s=tok-7 besides permit-pty and permit-port-forwarding", issued.Extensions, wire.CertTokenExtension)
	}
	if _, ok := noAgent.Extensions[wire.CertTokenExtension]; ok {
		t.Errorf("the gateway's own certificate names a token: %v", noAgent.Extensions)
	}
	checker := func(at time.Time) *ssh.CertChecker {
		return &ssh.CertChecker{
			IsUserAuthority: func(k ssh.PublicKey) bool { return string(k.Marshal()) == string(ca.PublicKey().Marshal()) },
			Clock:           func() time.Time { return at },
		}
	}
	if _, err := checker(now).Authenticate(connMeta("h1"), cert); err != nil {
		t.Fatalf("valid cert refused: %v", err)
	}
	// A clock 30 s behind still accepts it (ValidAfter is backdated).
	if _, err := checker(now.Add(-30*time.Second)).Authenticate(connMeta("h1"), cert); err != nil {
		t.Fatalf("slightly early clock refused: %v", err)
	}
	if _, err := checker(now).Authenticate(connMeta("h2"), cert); err == nil {
		t.Fatal("cert for h1 accepted for principal h2")
	}
	if _, err := checker(now.Add(6*time.Minute)).Authenticate(connMeta("h1"), cert); err == nil {
		t.Fatal("expired cert accepted")
	}
	other, _ := LoadOrCreate(filepath.Join(t.TempDir(), "ca_key"))
	foreign, _ := other.Sign(pub, "h1", "x", 0, true)
	if _, err := checker(now).Authenticate(connMeta("h1"), foreign); err == nil {
		t.Fatal("cert from another CA accepted")
	}
	if got := time.Unix(int64(foreign.ValidBefore), 0).Sub(time.Unix(int64(foreign.ValidAfter), 0)); got != DefaultTTL+Backdate {
		t.Errorf("default validity window %v", got)
	}
	if _, err := ca.Sign(cert, "h1", "x", 0, true); err == nil {
		t.Error("signed a certificate")
	}
	if _, err := ca.Sign(pub, "h1", "x", 48*time.Hour, true); err == nil {
		t.Error("48h ttl accepted")
	}
}

type connMeta string

func (c connMeta) User() string        { return string(c) }
func (connMeta) SessionID() []byte     { return nil }
func (connMeta) ClientVersion() []byte { return nil }
func (connMeta) ServerVersion() []byte { return nil }
func (connMeta) RemoteAddr() net.Addr  { return nil }
func (connMeta) LocalAddr() net.Addr   { return nil }

// TestCreatedKeyIsDurable: a new CA key's name is synced to disk once it
// is in place. The key was synced, its directory was not, and after a
// power loss the gateway could find no key, make another CA, and have
// every agent (each pinned to the first) refuse it. A power loss cannot
// be simulated here: durable.Synced says that the directory was synced,
// and after the link.
func TestCreatedKeyIsDurable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ca_key")
	var synced []string
	durable.Synced = func(d string) {
		if _, err := os.Stat(path); err == nil {
			synced = append(synced, d)
		}
	}
	defer func() { durable.Synced = nil }()
	if _, err := LoadOrCreate(path); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(synced, dir) {
		t.Fatalf("%s was not synced once the new CA key was linked into it: a power loss can lose the key", dir)
	}
}

// A CA key file that does not parse (cut short by a restore's copy onto a
// full disk, emptied) says what to do and is left as it is: it said only
// "ssh: no key found", and the fix is the key from a backup, not a new CA,
// which every enrolled agent refuses.
func TestLoadUnreadableKeyNamesFix(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ca_key")
	if _, err := LoadOrCreate(path); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range [][]byte{whole[:len(whole)/2], nil} {
		if err := os.WriteFile(path, cut, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadOrCreate(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "backup") {
			t.Errorf("a key of %d bytes: %v; want it to name the file and the backup", len(cut), err)
		}
		if b, _ := os.ReadFile(path); string(b) != string(cut) {
			t.Errorf("a key of %d bytes was replaced", len(cut))
		}
	}
}
