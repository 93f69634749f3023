package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hostgate/hostgate/internal/gateway/wire"
)

// bodyTransport answers every request with one status and body.
type bodyTransport struct {
	status int
	body   []byte
}

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: b.status, Body: io.NopCloser(bytes.NewReader(b.body)), Header: http.Header{}, Request: r}, nil
}

func fuzzClient(t *testing.T, status int, body []byte) *Client {
	c, err := New("http://gw.example", "t", &Options{HTTPClient: &http.Client{Transport: bodyTransport{status, body}}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// FuzzHosts reads a gateway's answer to GET /v1/hosts, in either shape
// (a list, or {"hosts": list}): the hosts it lists, or an error, never a
// list from a body that is not JSON.
func FuzzHosts(f *testing.F) {
	f.Add([]byte(`{"hosts":[{"id":"web-1","kind":"agent","hostKey":"SHA256:x","connected":true}]}`))
	f.Add([]byte(`[{"id":"web-1"},{"id":"web-2"}]`))
	f.Add([]byte(`{"hosts":null}`))
	f.Add([]byte(`[`))
	f.Add([]byte(`"hosts"`))
	f.Fuzz(func(t *testing.T, body []byte) {
		hosts, err := fuzzClient(t, http.StatusOK, body).Hosts(context.Background())
		if err != nil {
			if !strings.Contains(err.Error(), "hosts") {
				t.Fatalf("refusal that does not say what: %v", err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("%q read as %d hosts", body, len(hosts))
		}
		var list []json.RawMessage
		var wrapped struct{ Hosts []json.RawMessage }
		if json.Unmarshal(body, &list) == nil || json.Unmarshal(body, &wrapped) == nil && (list == nil) {
			if n := max(len(list), len(wrapped.Hosts)); n != len(hosts) {
				t.Fatalf("%q read as %d hosts, it lists %d", body, len(hosts), n)
			}
		}
	})
}

// FuzzAPIError reads an error answer: the status is the response's; the
// code and message are the body's when it is an error body, else the
// status text and what answered (wire.ForeignAnswer); the message is at most 512 bytes and an
// ellipsis, cut between characters, a prefix of what the gateway said.
func FuzzAPIError(f *testing.F) {
	f.Add(403, []byte(`{"error":{"code":"forbidden","message":"token revoked"}}`))
	f.Add(404, []byte(`{"error":{"code":"host_offline","message":"host web-1 is offline"}}`))
	f.Add(502, []byte("<html>502 Bad Gateway</html>\n"))
	f.Add(500, []byte(strings.Repeat("x", 600)))
	f.Add(400, []byte(`{"error":{"code":"invalid","message":"`+strings.Repeat("é", 300)+`"}}`))
	f.Add(400, []byte(`{"error":{"code":"invalid","message":"a`+strings.Repeat("é", 300)+`"}}`))
	f.Add(429, []byte(`{"error":{"code":"x"}}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		status = 300 + (status%300+300)%300 // 300–599: an answer doLong reads as an error
		err := fuzzClient(t, status, body).doLong(context.Background(), "GET", "/v1/hosts", nil, nil)
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != status {
			t.Fatalf("status %d: %v", status, err)
		}
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		said := wire.ForeignAnswer(status, string(body))
		if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
			if ae.Code != e.Error.Code {
				t.Fatalf("code %q, body says %q", ae.Code, e.Error.Code)
			}
			said = e.Error.Message
		}
		msg, cut := strings.CutSuffix(ae.Message, "…")
		if !cut || len(said) <= 512 {
			msg = ae.Message
		}
		if len(msg) > 512 || !strings.HasPrefix(said, msg) {
			t.Fatalf("message %q from %q", ae.Message, said)
		}
		if utf8.ValidString(said) && !utf8.ValidString(ae.Message) {
			t.Fatalf("message %q cut inside a character", ae.Message)
		}
	})
}
