package client

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCredentialsOfManyHostsNotKeptForever: a Client that dials host
// after host (each execution it provisions, say) keeps no more than a
// batch of the session keys and certificates it no longer has use for.
// Each host id dialed kept its credentials for the Client's life, some
// KiB each, so a program running for weeks grew without end. Here every
// certificate is due for renewal as it comes, so none is worth keeping.
func TestCredentialsOfManyHostsNotKeptForever(t *testing.T) {
	c, ctx := standIn(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost:
			_ = json.NewEncoder(w).Encode(Certificate{Certificate: "not a certificate", ValidBefore: time.Now().Add(10 * time.Second), HostKey: "SHA256:x"})
		case strings.HasSuffix(r.URL.Path, "/ssh"):
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"host_offline","message":"not connected to the gateway"}}`)
		default:
			_, _ = io.WriteString(w, `{"id":"h","kind":"machine","hostKey":"SHA256:x"}`)
		}
	}))
	defer c.CloseIdleConnections()
	const hosts = 4 * credsPruneMin
	for i := range hosts {
		if _, err := c.Dial(ctx, "h"+strconv.Itoa(i)); err == nil {
			t.Fatal("dial of an offline host: no error")
		}
	}
	c.credMu.Lock()
	kept := len(c.creds)
	c.credMu.Unlock()
	if kept > credsPruneMin {
		t.Fatalf("credentials of %d hosts kept after dialing %d, none of whose certificates is worth keeping; want at most %d", kept, hosts, credsPruneMin)
	}
}
