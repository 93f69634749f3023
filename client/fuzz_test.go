package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hostgate/hostgate/third_party/golang.org/x/crypto/ssh"

	"github.com/hostgate/hostgate/internal/gateway/sshca"
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

// FuzzExecAnswer reads a gateway's answer to an exec, asked as text or as
// base64: a result or an error that says what was wrong, and with base64
// the output the answer's base64 stands for, never the base64 itself.
func FuzzExecAnswer(f *testing.F) {
	f.Add([]byte(`{"exitCode":0,"stdout":"hi\n","stderr":"","durationMs":3}`), false)
	f.Add([]byte(`{"exitCode":1,"stdout":"aGkK","stderr":"","durationMs":3,"encoding":"base64"}`), true)
	f.Add([]byte(`{"exitCode":0,"stdout":"hi","encoding":"base64"}`), true)
	f.Add([]byte(`{"exitCode":0,"stdout":"hi"}`), true)
	f.Add([]byte(`<html>`), false)
	f.Fuzz(func(t *testing.T, body []byte, b64 bool) {
		req := ExecRequest{Command: "cat", TimeoutMs: 1000}
		if b64 {
			req.Encoding = EncodingBase64
		}
		r, err := fuzzClient(t, http.StatusOK, body).Exec(context.Background(), "e1", req)
		if err != nil {
			if !strings.Contains(err.Error(), "exec") {
				t.Fatalf("refusal that does not say what: %v", err)
			}
			return
		}
		var raw struct{ Stdout, Stderr, Encoding string }
		if json.Unmarshal(body, &raw) != nil {
			t.Fatalf("%q read as a result %+v", body, r)
		}
		if !b64 {
			if r.Stdout != raw.Stdout || r.Stderr != raw.Stderr {
				t.Fatalf("%q: output %q %q, want it as the answer says", body, r.Stdout, r.Stderr)
			}
			return
		}
		out, oerr := base64.StdEncoding.DecodeString(raw.Stdout)
		serr, eerr := base64.StdEncoding.DecodeString(raw.Stderr)
		if raw.Encoding != EncodingBase64 || oerr != nil || eerr != nil || r.Stdout != string(out) || r.Stderr != string(serr) {
			t.Fatalf("%q asked as base64: output %q %q", body, r.Stdout, r.Stderr)
		}
	})
}

// FuzzCertRenewBy reads the lifetime of a certificate the gateway signed:
// zero when it does not parse or says none, else a time within its window
// from now.
func FuzzCertRenewBy(f *testing.F) {
	f.Add("ssh-ed25519-cert-v01@openssh.com AAAA")
	f.Add("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl")
	f.Add("")
	f.Fuzz(func(t *testing.T, cert string) {
		before := time.Now()
		by := certRenewBy(cert)
		if by.IsZero() {
			return
		}
		pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(cert))
		c, ok := pub.(*ssh.Certificate)
		if err != nil || !ok {
			t.Fatalf("%q: renew by %v of what is no certificate (%v)", cert, by, err)
		}
		if c.ValidBefore-c.ValidAfter > 100*365*24*3600 {
			return // a window time.Duration cannot hold: any renewal time will do
		}
		window := time.Duration(c.ValidBefore-c.ValidAfter) * time.Second
		if by.After(time.Now().Add(window)) || by.Before(before.Add(-sshca.Backdate-30*time.Second)) {
			t.Fatalf("%q: renew by %v, outside its %v window from now", cert, by, window)
		}
	})
}

// FuzzNewGatewayURL reads New's gateway URL and token: a base URL of the
// gateway (http or https, a host, no credentials, query or fragment), or
// an error naming the argument at fault that quotes neither the token nor
// any user name or password the URL holds.
func FuzzNewGatewayURL(f *testing.F) {
	for _, s := range []string{"https://gw.example.com", "ws://127.0.0.1:8080/", "wss://gw/prefix", "gw:8080",
		"https://me:secret@gw", "ftp://me:secret@gw", "http://me:secret@gw/%zz", "ws://me:secret@", "me:secret@gw", "https://secret@gw", "//me:secret@gw"} {
		f.Add(s, "x")
	}
	f.Add("https://gw", "x\n")
	f.Add("https://gw", "x y")
	f.Fuzz(func(t *testing.T, raw, token string) {
		token = "hgfuzz_" + token // told apart from the errors' own words
		c, err := New(raw, token, nil)
		if err != nil {
			if !strings.Contains(err.Error(), "gateway URL") && !strings.Contains(err.Error(), "token") {
				t.Fatalf("%q, %q: %v, which names neither argument", raw, token, err)
			}
			if strings.Contains(err.Error(), token) && !strings.Contains(raw, token) {
				t.Fatalf("%q, %q: %v, which quotes the token", raw, token, err)
			}
			if u, perr := url.Parse(raw); perr == nil && u.User != nil {
				pw, _ := u.User.Password()
				if name := u.User.Username(); len(name) >= 4 && name != "xxxxx" && strings.Contains(err.Error(), name+"@") ||
					pw != "" && strings.Contains(err.Error(), ":"+pw+"@") {
					t.Fatalf("%q: %v, which quotes its credentials", raw, err)
				}
			}
			return
		}
		b := c.base
		if b.Scheme != "http" && b.Scheme != "https" || b.Host == "" || b.User != nil || b.RawQuery != "" || b.Fragment != "" {
			t.Fatalf("%q: base %q", raw, b)
		}
	})
}
