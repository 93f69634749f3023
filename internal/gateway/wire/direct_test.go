package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseDirectAddrs(t *testing.T) {
	got, err := ParseDirectAddrs(" 10.0.0.5:2222, Box.Example.COM:22 ,[::1]:2200")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.5:2222", "box.example.com:22", "[::1]:2200"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for in, wantErr := range map[string]string{
		"":                                "empty list",
		"10.0.0.5":                        "want host:port",
		"10.0.0.5:0":                      "port from 1 to 65535",
		"10.0.0.5:65536":                  "port from 1 to 65535",
		"10.0.0.5:022":                    "port from 1 to 65535",
		"0.0.0.0:22":                      "unspecified",
		"[::]:22":                         "unspecified",
		"224.0.0.1:22":                    "multicast",
		"bad_name:22":                     "neither an IP address nor a DNS name",
		"a..b:22":                         "neither",
		"a:22,,b:22":                      "empty",
		strings.Repeat("a:1,", 9) + "a:1": "at most 8",
		strings.Repeat("a", 300) + ":22":  "longer than",
	} {
		_, err := ParseDirectAddrs(in)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseDirectAddrs(%.40q) = %v, want an error with %q", in, err, wantErr)
		}
	}
}

// TestDirectMsgLine: what AppendDirectMsg writes ReadDirectMsg reads back,
// and a line of the longest strings still fits MaxDirectMsgLen.
func TestDirectMsgLine(t *testing.T) {
	msgs := []DirectMsg{
		{Op: DirectOpen, ID: 1, Serial: 1 << 63, KeyID: "client-ci", TokenID: "tok1", Remote: "10.0.0.9:51000"},
		{Op: DirectAdmit, ID: 1},
		{Op: DirectRefuse, ID: 2, Reason: "token revoked"},
		{Op: DirectEnd, ID: 1, Reason: "the session's token was revoked"},
		{Op: DirectClosed, ID: 1, ToHost: 5, FromHost: 1 << 40},
		// Every byte a control character: JSON writes each as \u00XX.
		{Op: DirectOpen, ID: 3, KeyID: strings.Repeat("\x01", 5000), TokenID: strings.Repeat("\x02", 5000),
			Remote: strings.Repeat("\x03", 5000), Reason: strings.Repeat("\x04", 5000)},
	}
	var b []byte
	for _, m := range msgs {
		n := len(b)
		b = AppendDirectMsg(b, m)
		if l := len(b) - n; l > MaxDirectMsgLen {
			t.Fatalf("a line of %d bytes, over %d", l, MaxDirectMsgLen)
		}
	}
	r := NewDirectReader(bytes.NewReader(b))
	for i, want := range msgs[:5] {
		got, err := ReadDirectMsg(r)
		if err != nil || got != want {
			t.Fatalf("message %d: got %+v, %v; want %+v", i, got, err, want)
		}
	}
	if got, err := ReadDirectMsg(r); err != nil || got.ID != 3 || len(got.Reason) > 300+len("…") {
		t.Fatalf("the cut message: %+v, %v", got, err)
	}
	if _, err := ReadDirectMsg(r); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
}

func TestReadDirectMsgRefuses(t *testing.T) {
	for in, wantErr := range map[string]string{
		strings.Repeat("x", MaxDirectMsgLen+10) + "\n": "longer than",
		`{"op":"open","id":1}` + "\n":                  "no token id",
		`{"op":"sing","id":1}` + "\n":                  "unknown op",
		`{"op":"closed","id":1,"toHost":-1}` + "\n":    "negative",
		`{"op":` + "\n":                                "direct message",
	} {
		_, err := ReadDirectMsg(NewDirectReader(strings.NewReader(in)))
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%.40q: %v, want an error with %q", in, err, wantErr)
		}
	}
	_, err := ReadDirectMsg(NewDirectReader(strings.NewReader(`{"op":"admit","id":1}`)))
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a line cut short: %v, want io.ErrUnexpectedEOF", err)
	}
}

func FuzzReadDirectMsg(f *testing.F) {
	f.Add([]byte(`{"op":"open","id":1,"serial":9,"keyId":"k","tokenId":"t","remote":"1.2.3.4:5"}` + "\n"))
	f.Add([]byte(`{"op":"closed","id":1,"toHost":5,"fromHost":6}` + "\n" + `{"op":"end","id":2}` + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewDirectReader(bytes.NewReader(b))
		for range 64 {
			m, err := ReadDirectMsg(r)
			if err != nil {
				return
			}
			if err := m.Check(); err != nil {
				t.Fatalf("read a message its Check refuses: %v", err)
			}
			line := AppendDirectMsg(nil, m)
			again, err := ReadDirectMsg(bufio.NewReaderSize(bytes.NewReader(line), MaxDirectMsgLen))
			if err != nil {
				t.Fatalf("its own line %q: %v", line, err)
			}
			if again.Op != m.Op || again.ID != m.ID || again.Serial != m.Serial {
				t.Fatalf("round trip: %+v became %+v", m, again)
			}
		}
	})
}

func FuzzParseDirectAddrs(f *testing.F) {
	f.Add("10.0.0.5:2222,box.example.com:22,[::1]:2200")
	f.Add("a:1,b:2")
	f.Fuzz(func(t *testing.T, s string) {
		addrs, err := ParseDirectAddrs(s)
		if err != nil {
			return
		}
		if len(addrs) == 0 || len(addrs) > MaxDirectAddrs {
			t.Fatalf("%d addresses", len(addrs))
		}
		// What it returns parses again to itself: the gateway publishes
		// the list, and a caller dials it.
		again, err := ParseDirectAddrs(strings.Join(addrs, ","))
		if err != nil || !slices.Equal(again, addrs) {
			t.Fatalf("%q: again %q, %v", addrs, again, err)
		}
	})
}

const testHostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"

func TestParseDirectAnswer(t *testing.T) {
	a, pub, err := ParseDirectAnswer([]byte(`{"direct":["10.0.0.5:2222","Box.Example.com:22"],"hostPublicKey":"` + testHostKey + ` comment"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"10.0.0.5:2222", "box.example.com:22"}; !slices.Equal(a.Direct, want) {
		t.Errorf("addresses %q, want %q", a.Direct, want)
	}
	if a.HostPublicKey != testHostKey || pub == nil || pub.Type() != "ssh-ed25519" {
		t.Errorf("key %q (%v), want %q without its comment", a.HostPublicKey, pub, testHostKey)
	}
	for _, body := range []string{
		``,
		`{`,
		`[]`,
		`{"direct":[],"hostPublicKey":"` + testHostKey + `"}`,
		`{"hostPublicKey":"` + testHostKey + `"}`,
		`{"direct":["10.0.0.5:2222"]}`,
		`{"direct":["10.0.0.5:2222"],"hostPublicKey":"ssh-ed25519 AAAA"}`,
		`{"direct":["10.0.0.5:2222"],"hostPublicKey":"` + testHostKey + `\n` + testHostKey + `"}`,
		`{"direct":["10.0.0.5"],"hostPublicKey":"` + testHostKey + `"}`,
		`{"direct":["0.0.0.0:22"],"hostPublicKey":"` + testHostKey + `"}`,
		`{"direct":["a:1,b:2"],"hostPublicKey":"` + testHostKey + `"}`,
		`{"direct":["a:1","a:2","a:3","a:4","a:5","a:6","a:7","a:8","a:9"],"hostPublicKey":"` + testHostKey + `"}`,
		`{"direct":["a:1"],"hostPublicKey":"` + testHostKey + `","x":"` + strings.Repeat("x", MaxDirectAnswerLen) + `"}`,
	} {
		if a, _, err := ParseDirectAnswer([]byte(body)); err == nil {
			t.Errorf("%.80q parsed: %+v", body, a)
		}
	}
}

func FuzzParseDirectAnswer(f *testing.F) {
	f.Add([]byte(`{"direct":["10.0.0.5:2222","[::1]:22"],"hostPublicKey":"` + testHostKey + `"}`))
	f.Add([]byte(`{"direct":["box:22"],"hostPublicKey":"` + testHostKey + ` c"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, pub, err := ParseDirectAnswer(b)
		if err != nil {
			return
		}
		if pub == nil || len(a.Direct) == 0 || len(a.Direct) > MaxDirectAddrs {
			t.Fatalf("parsed %+v, key %v", a, pub)
		}
		// What it returns parses again to itself: the proxy dials these
		// addresses and compares the key it is shown with this one.
		j, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		again, _, err := ParseDirectAnswer(j)
		if err != nil || !slices.Equal(again.Direct, a.Direct) || again.HostPublicKey != a.HostPublicKey {
			t.Fatalf("%+v: again %+v, %v", a, again, err)
		}
	})
}

// DirectFailedValue makes any error a valid header value: one line, no
// control characters (Go's HTTP client refuses a request whose header
// holds one: "invalid header field value"), cut to MaxDirectFailedLen
// bytes.
func TestDirectFailedValue(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"direct: no address answered", "direct: no address answered"},
		{"line one\nline two\r\x00\x7f\tend", "line one line two    end"},
	} {
		if got := DirectFailedValue(errors.New(tc.in)); got != tc.want {
			t.Errorf("DirectFailedValue(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	long := DirectFailedValue(errors.New(strings.Repeat("é", 400)))
	if len(long) > MaxDirectFailedLen+len("…") || !utf8.ValidString(long) || !strings.HasSuffix(long, "…") {
		t.Errorf("a long reason: %d bytes, valid UTF-8 %v: %q", len(long), utf8.ValidString(long), long)
	}
}
