package bytestream

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRedirectNeverDowngradesToPlaintext: a handshake to https:// that
// the server redirects to http:// (a proxy or ingress pointing at its
// plain port) is refused before the plain request is made: net/http
// copies Authorization to a redirect on the same host whatever its
// scheme, so following it sent the bearer token unencrypted. The error
// names the redirect and what to give instead.
func TestRedirectNeverDowngradesToPlaintext(t *testing.T) {
	got := make(chan string, 4) // the Authorization each plain request carried
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
		if c, err := Accept(w, r, nil); err == nil {
			_ = c.Close()
		}
	}))
	t.Cleanup(plain.Close)
	redir := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The same host as the TLS server (127.0.0.1), the plain port.
		http.Redirect(w, r, plain.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redir.Close)
	trustTestCert(t)

	h := http.Header{}
	h.Set("Authorization", "Bearer hg_secret")
	c, _, err := DialWebSocket(testCtx(t), redir.URL+"/v1/agents/connect", &WebSocketOptions{Header: h})
	if err == nil {
		_ = c.Close()
	}
	select {
	case a := <-got:
		t.Fatalf("the redirect to %s was followed, with Authorization %q", plain.URL, a)
	default:
	}
	if err == nil {
		t.Fatal("dial succeeded through a redirect from https to http")
	}
	for _, want := range []string{plain.URL, "unencrypted", "https://"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
