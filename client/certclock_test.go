package client

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate"
	"github.com/hostgate/hostgate/internal/gateway/sshca"
)

// A client whose wall clock is behind the gateway's by more than a
// certificate's lifetime renews it by the lifetime the gateway signed,
// counted on its own clock: by ValidBefore alone it kept the expired
// certificate, and every reconnect failed to authenticate until its clock
// caught up (found by the chaos44 audit). Here validBefore reads as years
// away to the client; the certificate's own window leaves it 33 s, 3 s
// before the client's 30 s margin.
func TestCertificateRenewedByItsLifetime(t *testing.T) {
	_, caPriv, _ := ed25519.GenerateKey(rand.Reader)
	ca, _ := ssh.NewSignerFromKey(caPriv)
	var certs atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/hosts/box", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"id":"box","kind":"machine","hostKey":"SHA256:x","connected":false}`)
	})
	mux.HandleFunc("POST /v1/hosts/box/certificates", func(w http.ResponseWriter, r *http.Request) {
		certs.Add(1)
		var req struct{ PublicKey string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(req.PublicKey))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		now := time.Now()
		cert := &ssh.Certificate{Key: pub, CertType: ssh.UserCert, ValidPrincipals: []string{"box"},
			ValidAfter: uint64(now.Add(-sshca.Backdate).Unix()), ValidBefore: uint64(now.Add(33 * time.Second).Unix())}
		if err := cert.SignCert(rand.Reader, ca); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"certificate": string(ssh.MarshalAuthorizedKey(cert)),
			"validBefore": "2999-01-01T00:00:00Z", "hostKey": "SHA256:x"})
	})
	mux.HandleFunc("GET /v1/hosts/box/ssh", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error":{"code":"host_offline","message":"host box: not connected to the gateway"}}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := New(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	h := c.LazyHost("box")
	defer h.Close()
	exec := func() {
		t.Helper()
		if _, err := h.Exec(t.Context(), []string{"true"}, hostgate.ExecOptions{}); !errors.Is(err, ErrOffline) {
			t.Fatalf("exec on an offline host: %v, want ErrOffline", err)
		}
	}
	exec()
	exec()
	if n := certs.Load(); n != 1 {
		t.Fatalf("%d certificates for two connects at once, want 1 (kept)", n)
	}
	// Past the lifetime less the margin, by this machine's clock.
	time.Sleep(3500 * time.Millisecond)
	exec()
	if n := certs.Load(); n != 2 {
		t.Fatalf("%d certificates after its lifetime less 30 s passed, want 2: it was renewed by validBefore alone", n)
	}
}
