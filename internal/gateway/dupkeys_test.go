package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate/internal/gateway/wire"
	"github.com/hostgate/hostgate/internal/store"
)

type dupBody struct {
	Command string            `json:"command"`
	Env     map[string]string `json:"env"`
	Inner   struct {
		Mode string `json:"mode"`
	} `json:"inner"`
	Items []struct {
		Mode string `json:"mode"`
	} `json:"items"`
	When time.Time `json:"when"`
	Any  any       `json:"any"`
}

func checkKeys(body string, v any) error {
	r, k := CheckKeys(bytes.NewReader([]byte(body)), v)
	_, _ = io.Copy(io.Discard, r)
	return k.Err()
}

func TestCheckKeys(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"command":"a","env":{"A":"1","a":"2"},"inner":{"mode":"x"},"items":[{"mode":"a"},{"mode":"b"}],"any":{"x":1,"X":2}}`, ""},
		{`{"command":"a","command":"b"}`, "command: appears twice in its object; send each key once"},
		{`{"command":"a","COMMAND":"b"}`, "COMMAND: appears twice in its object; send each key once"},
		{`{"command":"a","comm\u0061nd":"b"}`, "command: appears twice in its object; send each key once"},
		{`{"env":{"A":"1","B":"\"A\":","A":"2"}}`, "env.A: appears twice in its object; send each key once"},
		{`{"inner":{"mode":"x","Mode":"y"}}`, "inner.Mode: appears twice in its object; send each key once"},
		{`{"items":[{"mode":"a"},{"mode":"b","mode":"c"}]}`, "items.mode: appears twice in its object; send each key once"},
		{`{"any":{"x":{"y":1,"y":2}}}`, "any.x.y: appears twice in its object; send each key once"},
		{`{"command":"{\"command\":1,\"command\":2}"}`, ""},
		{`{"a\\":1,"a\\":2}`, `a\: appears twice in its object; send each key once`},
		{`{"any":[{"x":[{"y":{"z":1,"z":2}}]}]}`, "any.x.y.z: appears twice in its object; send each key once"},
		{`{"any":{"":{"z":1,"z":2}}}`, "any..z: appears twice in its object; send each key once"},
		// A null element of strings is refused; a null field, or a null
		// where any value goes, is not.
		{`{"env":{"A":"1","B":null}}`, "env.B: null where a string is wanted; send the value, or leave the element out"},
		{`{"env":{"A":"null","B":" null "}}`, ""},
		{`{"command":null,"env":null,"inner":null,"any":[null,{"a":null}]}`, ""},
	} {
		var v dupBody
		got := ""
		if err := checkKeys(c.body, &v); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.body, got, c.want)
		}
	}
}

// refDup reports whether valid JSON body has a key twice in one object,
// by encoding/json's tokens, comparing keys exactly.
func refDup(dec *json.Decoder) (bool, error) {
	tok, err := dec.Token()
	if err != nil {
		return false, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return false, nil
	}
	seen := map[string]bool{}
	dup := false
	for dec.More() {
		if d == '{' {
			kt, err := dec.Token()
			if err != nil {
				return false, err
			}
			key := kt.(string)
			dup = dup || seen[key]
			seen[key] = true
		}
		sub, err := refDup(dec)
		if err != nil {
			return false, err
		}
		dup = dup || sub
	}
	_, err = dec.Token()
	return dup, err
}

// FuzzCheckKeys: on any valid JSON, CheckKeys into an any finds a
// duplicate exactly when encoding/json's tokens show one; on any input it
// does not panic.
func FuzzCheckKeys(f *testing.F) {
	f.Add(`{"a":1,"a":2}`)
	f.Add(`{"a":{"b":[{"c":1},{"c":1,"c":2}]}}`)
	f.Add(`{"a\"":1,"a\u0022":2}`)
	f.Add(`[{"x":"{\"x\":1}"}, {"x":1}]`)
	f.Fuzz(func(t *testing.T, body string) {
		var v any
		err := checkKeys(body, &v)
		if !json.Valid([]byte(body)) {
			return
		}
		want, rerr := refDup(json.NewDecoder(bytes.NewReader([]byte(body))))
		if rerr != nil {
			t.Fatalf("%q: reference: %v", body, rerr)
		}
		if (err != nil) != want {
			t.Fatalf("%q: CheckKeys %v, want duplicate %v", body, err, want)
		}
	})
}

// TestCertificateDuplicateKey: a certificate body naming publicKey twice
// was signed for the last one; it is refused, naming the key.
func TestCertificateDuplicateKey(t *testing.T) {
	e := newEnv(t, nil)
	_, hostKey := newKey(t)
	if _, err := e.store.Enroll(e.ctx, store.Enrollment{HostID: "a", HostKey: hostKey}); err != nil {
		t.Fatal(err)
	}
	client := e.token(store.RoleClient, "a")
	_, userPub := newKey(t)
	req, _ := http.NewRequestWithContext(e.ctx, "POST", e.ts.URL+"/v1/hosts/a/certificates", strings.NewReader(`{"publicKey":"x","publicKey":"`+userPub+`"}`))
	req.Header.Set("Authorization", "Bearer "+client)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	we, _ := wire.ParseError(b)
	if res.StatusCode != 400 || we.Code != "bad_request" || we.Message != "publicKey: appears twice in its object; send each key once" {
		t.Fatalf("publicKey twice: %d %s, want 400 bad_request naming publicKey", res.StatusCode, b)
	}
}

// TestCheckKeysDeepBodyMemory sends a body within maxBody of objects
// nested 8,000 deep ({"abc":{"abc":…), as any token's holder may to
// POST /v1/hosts/{id}/certificates: each level's frame kept its whole
// path, so the check held 137 MB at once for those 57 KB.
func TestCheckKeysDeepBodyMemory(t *testing.T) {
	body := strings.Repeat(`{"abc":`, (maxBody-16)/len(`{"abc":`))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r, k := CheckKeys(strings.NewReader(body), &certRequest{})
	_, _ = io.Copy(io.Discard, r)
	runtime.ReadMemStats(&after)
	if err := k.Err(); err != nil {
		t.Fatal(err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Fatalf("checking the keys of a %d-byte body allocated %d MiB", len(body), got>>20)
	}
}
