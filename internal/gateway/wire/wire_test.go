package wire

import (
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
