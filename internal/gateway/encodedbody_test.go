package gateway

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"testing"

	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
)

// TestEncodedBodyRefused: a gzipped body was read as JSON and refused as
// "invalid character '\x1f'", which names neither the header nor the fix;
// and a plain body labelled gzip was taken. Both are refused, naming the
// Content-Encoding; identity is no encoding.
func TestEncodedBodyRefused(t *testing.T) {
	e := newEnv(t, nil)
	_, hostKey := newKey(t)
	if _, err := e.store.Enroll(e.ctx, store.Enrollment{HostID: "a", HostKey: hostKey}); err != nil {
		t.Fatal(err)
	}
	client := e.token(store.RoleClient, "a")
	_, userPub := newKey(t)
	plain := []byte(`{"publicKey":"` + userPub + `"}`)
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write(plain)
	_ = zw.Close()
	post := func(body []byte, encoding string) (int, wire.Error) {
		req, _ := http.NewRequestWithContext(e.ctx, "POST", e.ts.URL+"/v1/hosts/a/certificates", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+client)
		req.Header.Set("Content-Encoding", encoding)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		we, _ := wire.ParseError(b)
		return res.StatusCode, we
	}
	for _, c := range []struct {
		body     []byte
		encoding string
	}{{zipped.Bytes(), "gzip"}, {plain, "gzip"}, {plain, "identity, br"}} {
		code, we := post(c.body, c.encoding)
		if code != 400 || we.Code != "bad_request" || !bytes.Contains([]byte(we.Message), []byte("Content-Encoding")) || !bytes.Contains([]byte(we.Message), []byte("without Content-Encoding")) {
			t.Errorf("Content-Encoding %q: %d %+v, want 400 bad_request naming Content-Encoding and the fix", c.encoding, code, we)
		}
	}
	if code, we := post(plain, "identity"); code != 200 {
		t.Errorf("Content-Encoding identity: %d %+v, want 200", code, we)
	}
}

// TestByteOrderMarkNamed: a body saved with a byte order mark (an
// editor's "UTF-8 with BOM", PowerShell 5's -Encoding UTF8) was refused
// as "invalid character 'ï' looking for beginning of value", which names
// neither the mark nor the fix. It is named, with what to send instead.
func TestByteOrderMarkNamed(t *testing.T) {
	e := newEnv(t, nil)
	_, hostKey := newKey(t)
	if _, err := e.store.Enroll(e.ctx, store.Enrollment{HostID: "a", HostKey: hostKey}); err != nil {
		t.Fatal(err)
	}
	client := e.token(store.RoleClient, "a")
	_, userPub := newKey(t)
	req, _ := http.NewRequestWithContext(e.ctx, "POST", e.ts.URL+"/v1/hosts/a/certificates",
		bytes.NewReader([]byte("\xef\xbb\xbf{\"publicKey\":\""+userPub+"\"}")))
	req.Header.Set("Authorization", "Bearer "+client)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	we, _ := wire.ParseError(b)
	if res.StatusCode != 400 || we.Code != "bad_request" || !bytes.Contains([]byte(we.Message), []byte("byte order mark")) || !bytes.Contains([]byte(we.Message), []byte("without")) {
		t.Errorf("body with a BOM: %d %+v, want 400 bad_request naming the byte order mark and sending it without one", res.StatusCode, we)
	}
}

// TestEmptyBodyNamed: a POST sent without its body (curl -X POST without
// -d) was answered "body: not valid JSON: EOF", which says neither that
// the body was empty nor what it takes.
func TestEmptyBodyNamed(t *testing.T) {
	e := newEnv(t, nil)
	_, hostKey := newKey(t)
	if _, err := e.store.Enroll(e.ctx, store.Enrollment{HostID: "a", HostKey: hostKey}); err != nil {
		t.Fatal(err)
	}
	client := e.token(store.RoleClient, "a")
	req, _ := http.NewRequestWithContext(e.ctx, "POST", e.ts.URL+"/v1/hosts/a/certificates", nil)
	req.Header.Set("Authorization", "Bearer "+client)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	we, _ := wire.ParseError(b)
	if res.StatusCode != 400 || !bytes.Contains([]byte(we.Message), []byte("empty")) || !bytes.Contains([]byte(we.Message), []byte("publicKey")) {
		t.Errorf("empty body: %d %+v, want 400 saying the body is empty and that it takes publicKey", res.StatusCode, we)
	}
}
