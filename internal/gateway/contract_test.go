package gateway

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/store"
	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"
)

// TestHostsWireContract holds the hosts API to DESIGN.md's wire contract
// as the JSON on the wire spells it (the client package decodes with the
// same tags, so a renamed field would pass every test that goes through
// it): GET /v1/hosts and GET /v1/hosts/{id} give {id, kind, info,
// hostKey: "SHA256:…", hostPublicKey: "ssh-ed25519 AAAA…", connected}, and
// POST /v1/hosts/{id}/certificates {publicKey} gives {certificate,
// validBefore, hostKey}.
func TestHostsWireContract(t *testing.T) {
	e := newEnv(t, nil)
	_, hostKey := newKey(t)
	if _, err := e.store.Enroll(e.ctx, store.Enrollment{HostID: "a", Kind: "machine", Info: json.RawMessage(`{"os":"linux"}`), HostKey: hostKey}); err != nil {
		t.Fatal(err)
	}
	pub, _, _, _, _ := ssh.ParseAuthorizedKey([]byte(hostKey))
	fingerprint := ssh.FingerprintSHA256(pub)
	admin := e.token(store.RoleAdmin)

	record := func(what string, r map[string]json.RawMessage) {
		t.Helper()
		var id, kind, hk, hpk string
		var connected *bool
		var info map[string]any
		for k, into := range map[string]any{"id": &id, "kind": &kind, "hostKey": &hk, "hostPublicKey": &hpk, "connected": &connected, "info": &info} {
			if err := json.Unmarshal(r[k], into); err != nil {
				t.Errorf("%s: field %s: %v (%s)", what, k, err, r[k])
			}
		}
		if id != "a" || kind != "machine" || hk != fingerprint || !strings.HasPrefix(hk, "SHA256:") || hpk != hostKey ||
			!strings.HasPrefix(hpk, "ssh-ed25519 AAAA") || connected == nil || *connected || info == nil {
			b, _ := json.Marshal(r)
			t.Errorf("%s: %s, want {id: a, kind: machine, info: {…}, hostKey: %s, hostPublicKey: %s, connected: false}", what, b, fingerprint, hostKey)
		}
	}
	var one map[string]json.RawMessage
	if code, c := e.call("GET", "/v1/hosts/a", admin, nil, &one); code != 200 {
		t.Fatalf("GET /v1/hosts/a: %d %s", code, c)
	}
	record("GET /v1/hosts/a", one)
	var list struct {
		Hosts []map[string]json.RawMessage `json:"hosts"`
	}
	if code, c := e.call("GET", "/v1/hosts", admin, nil, &list); code != 200 || len(list.Hosts) != 1 {
		t.Fatalf("GET /v1/hosts: %d %s %v, want {hosts: [the one host]}", code, c, list)
	}
	record("GET /v1/hosts", list.Hosts[0])

	_, userPub := newKey(t)
	var cert struct {
		Certificate string    `json:"certificate"`
		ValidBefore time.Time `json:"validBefore"`
		HostKey     string    `json:"hostKey"`
	}
	code, c := e.call("POST", "/v1/hosts/a/certificates", e.token(store.RoleClient, "a"), map[string]string{"publicKey": userPub}, &cert)
	if code != 200 || !strings.HasPrefix(cert.Certificate, "ssh-ed25519-cert-v01@openssh.com ") ||
		!cert.ValidBefore.After(time.Now()) || cert.HostKey != fingerprint {
		t.Fatalf("POST /v1/hosts/a/certificates: %d %s %+v, want 200 {certificate, validBefore, hostKey: %s}", code, c, cert, fingerprint)
	}
}
