package wire

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hostgate/hostgate"
)

func TestInfoRoundTrip(t *testing.T) {
	in := hostgate.Info{Kind: "machine", OS: "linux", Home: "/home/ü", TempDir: "/tmp", Workspace: "/w", Persistent: true}
	got, err := DecodeInfo(EncodeInfo(in))
	if err != nil || got != in {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{"!!", EncodeInfo(in)[:5], strings.Repeat("A", MaxInfoLen+1), "e30"[:2]} {
		if _, err := DecodeInfo(bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
	if got, err := DecodeInfo(""); err != nil || got != (hostgate.Info{}) {
		t.Errorf("empty: %+v %v", got, err)
	}
}

func TestParseError(t *testing.T) {
	e, ok := ParseError([]byte(`{"error":{"code":"host_key_mismatch","message":"m"}}`))
	if !ok || e.Code != "host_key_mismatch" || e.Message != "m" {
		t.Fatalf("%+v %v", e, ok)
	}
	if _, ok := ParseError([]byte(`<html>`)); ok {
		t.Error("html parsed as error")
	}
}

func FuzzDecodeInfo(f *testing.F) {
	f.Add(EncodeInfo(hostgate.Info{Kind: "x"}))
	f.Add("e30")
	f.Fuzz(func(t *testing.T, s string) {
		info, err := DecodeInfo(s)
		if err != nil {
			return
		}
		if again, err := DecodeInfo(EncodeInfo(info)); err != nil || again != info {
			t.Fatalf("re-encode of %+v: %+v %v", info, again, err)
		}
	})
}

// FuzzParseError: an error answer is read as the code and message it
// carries (what the agent and `gateway proxy` print), and encoding them
// again reads back the same; a body without a code is not an error answer.
func FuzzParseError(f *testing.F) {
	f.Add([]byte(`{"error":{"code":"forbidden","message":"token revoked"}}`))
	f.Add([]byte(`{"error":{"code":"","message":"x"}}`))
	f.Add([]byte(`{"error":"forbidden"}`))
	f.Add([]byte("<html>502 Bad Gateway</html>"))
	f.Add([]byte(`{"error":{"code":"x","message":"\ud800"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		e, ok := ParseError(body)
		if !ok {
			if e != (Error{}) {
				t.Fatalf("not an error answer, yet %+v", e)
			}
			return
		}
		if e.Code == "" {
			t.Fatalf("%q read as an error without a code", body)
		}
		again, err := json.Marshal(ErrorBody{e})
		if err != nil {
			t.Fatal(err)
		}
		if e2, ok := ParseError(again); !ok || e2 != e {
			t.Fatalf("%+v encodes as %s, read back as %+v", e, again, e2)
		}
	})
}

func TestForeignAnswer(t *testing.T) {
	for _, tc := range []struct {
		status       int
		body         string
		want, absent string
	}{
		{502, "<html><head><title>502 Bad Gateway</title></head><body>…</body></html>", "the gateway did not answer: its URL answered HTTP 502 Bad Gateway, as a proxy", "<"},
		{503, "", "HTTP 503 Service Unavailable, as a proxy", `""`},
		{504, "<html><body>no title</body></html>", "HTTP 504 Gateway Timeout, as a proxy", "<"},
		{400, "Client sent an HTTP request to an HTTPS server.\n", `HTTP 400 Bad Request ("Client sent an HTTP request to an HTTPS server."), not the gateway's JSON: check that the URL is the gateway's --public-url`, "\n"},
		{403, strings.Repeat("é", 300), "…", strings.Repeat("é", 101)},
		// Bytes whose lower case is longer or shorter than they are
		// (invalid UTF-8, the Kelvin sign) before the title: the title
		// is still found in the body itself, not at a shifted offset.
		{502, "\xff\xff\xff\xff<title>", "HTTP 502 Bad Gateway, as a proxy", "<"},
		{502, "\xff\xff<TITLE>Down</Title>after", `HTTP 502 Bad Gateway ("Down"), as a proxy`, "after"},
		{502, "\u212a\u212a<title>Down</title>", `("Down")`, "\u212a"},
	} {
		got := ForeignAnswer(tc.status, tc.body)
		if !strings.Contains(got, tc.want) || strings.Contains(got, tc.absent) {
			t.Errorf("ForeignAnswer(%d, %q) = %q; want %q in it and not %q", tc.status, tc.body, got, tc.want, tc.absent)
		}
	}
}
