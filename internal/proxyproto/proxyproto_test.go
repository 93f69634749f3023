package proxyproto

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"testing/iotest"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAppendParse(t *testing.T) {
	for _, tc := range []struct {
		h    Header
		line string
	}{
		{Header{}, "PROXY UNKNOWN\r\n"},
		{Header{Src: netip.MustParseAddrPort("127.0.0.1:54321"), Dst: netip.MustParseAddrPort("127.0.0.1:8080")},
			"PROXY TCP4 127.0.0.1 127.0.0.1 54321 8080\r\n"},
		{Header{Src: netip.MustParseAddrPort("[2001:db8::7]:0"), Dst: netip.MustParseAddrPort("[::1]:443")},
			"PROXY TCP6 2001:db8::7 ::1 0 443\r\n"},
		// A v4-mapped caller is written as IPv4; a Dst of the other
		// family (a v6 caller through a v4 listener) as unspecified.
		{Header{Src: netip.MustParseAddrPort("[::ffff:10.1.2.3]:9"), Dst: netip.MustParseAddrPort("[::1]:443")},
			"PROXY TCP4 10.1.2.3 0.0.0.0 9 0\r\n"},
		{Header{Src: netip.MustParseAddrPort("[2001:db8::7]:1"), Dst: netip.MustParseAddrPort("127.0.0.1:443")},
			"PROXY TCP6 2001:db8::7 :: 1 0\r\n"},
		{Header{Src: netip.MustParseAddrPort("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"), Dst: netip.MustParseAddrPort("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535")},
			"PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"},
	} {
		got := string(tc.h.Append(nil))
		if got != tc.line {
			t.Errorf("Append(%v) = %q, want %q", tc.h, got, tc.line)
		}
		if len(got) > MaxLen {
			t.Errorf("%q: %d bytes, over %d", got, len(got), MaxLen)
		}
		h, err := Parse([]byte(got))
		if err != nil {
			t.Fatalf("Parse(%q): %v", got, err)
		}
		if h.Known() != tc.h.Src.IsValid() || (h.Known() && h.Src.Addr().Unmap() != tc.h.Src.Addr().Unmap()) || h.Src.Port() != tc.h.Src.Port() {
			t.Errorf("Parse(%q) = %v, want the source of %v", got, h, tc.h)
		}
	}
}

func TestParseStrict(t *testing.T) {
	good := []string{
		"PROXY UNKNOWN\r\n",
		"PROXY UNKNOWN ffff::1 ::1 1 2\r\n", // the rest is ignored
		"PROXY TCP4 1.2.3.4 5.6.7.8 0 65535\r\n",
		"PROXY TCP6 ::1 ::ffff:1.2.3.4 1 2\r\n",
	}
	for _, l := range good {
		if _, err := Parse([]byte(l)); err != nil {
			t.Errorf("Parse(%q): %v", l, err)
		}
	}
	bad := []string{
		"",
		"PROXY UNKNOWN",
		"PROXY UNKNOWN\n",
		"PROXY UNKNOWNX\r\n",
		"proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
		"PROXY  TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
		"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n",
		"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n",
		"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
		"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",
		"PROXY TCP4 ::1 5.6.7.8 1 2\r\n",
		"PROXY TCP6 1.2.3.4 ::1 1 2\r\n",
		"PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n",
		"PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n",
		"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",
		"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n",
		"PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n",
		"PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n",
		"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\nSSH-2.0-x\r\n",
		"PROXY TCP4 1.2.3.4\r 5.6.7.8 1 2\r\n",
		"PROXY UNKNOWN " + strings.Repeat("x", 100) + "\r\n",
	}
	for _, l := range bad {
		_, err := Parse([]byte(l))
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) = %v, want ErrMalformed", l, err)
		}
	}
}

func TestRead(t *testing.T) {
	const ssh = "SSH-2.0-Go\r\n"
	line := "PROXY TCP4 127.0.0.1 127.0.0.1 40000 8080\r\n"
	// Whole, and a byte at a time: the same line and the same rest.
	for _, r := range []io.Reader{strings.NewReader(line + ssh), iotest.OneByteReader(strings.NewReader(line + ssh))} {
		h, rest, err := Read(r)
		if err != nil {
			t.Fatal(err)
		}
		if h.Src != netip.MustParseAddrPort("127.0.0.1:40000") {
			t.Errorf("Src = %v", h.Src)
		}
		after, _ := io.ReadAll(r)
		if got := string(rest) + string(after); got != ssh {
			t.Errorf("after the line: %q, want %q", got, ssh)
		}
	}
	// An SSH client where a line was due fails at once, not after 107
	// bytes (which it may never send).
	if _, _, err := Read(iotest.OneByteReader(strings.NewReader("SSH-2.0-"))); !errors.Is(err, ErrMalformed) {
		t.Errorf("SSH version: %v", err)
	}
	if _, _, err := Read(strings.NewReader("")); err != io.EOF {
		t.Errorf("empty: %v, want io.EOF", err)
	}
	if _, _, err := Read(strings.NewReader("PROXY TCP4 ")); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut short: %v", err)
	}
	long := "PROXY UNKNOWN " + strings.Repeat("x", 200)
	r := strings.NewReader(long)
	if _, _, err := Read(r); !errors.Is(err, ErrMalformed) {
		t.Errorf("no CRLF: %v", err)
	}
	if read := len(long) - r.Len(); read > MaxLen {
		t.Errorf("read %d bytes of a line without CRLF, want at most %d", read, MaxLen)
	}
}

func TestAccept(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		_, _ = b.Write([]byte("PROXY TCP6 2001:db8::1 ::1 4242 22\r\nhello"))
		_ = b.Close()
	}()
	c, h, err := Accept(a)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Known() {
		t.Fatal("caller unknown")
	}
	ta, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok || ta.String() != "[2001:db8::1]:4242" {
		t.Errorf("RemoteAddr = %v", c.RemoteAddr())
	}
	got, _ := io.ReadAll(c)
	if string(got) != "hello" {
		t.Errorf("read %q", got)
	}

	// UNKNOWN keeps the stream's own address.
	a2, b2 := net.Pipe()
	go func() { _, _ = b2.Write([]byte("PROXY UNKNOWN\r\n")); _ = b2.Close() }()
	c2, _, err := Accept(a2)
	if err != nil {
		t.Fatal(err)
	}
	if c2.RemoteAddr() != a2.RemoteAddr() {
		t.Errorf("RemoteAddr = %v", c2.RemoteAddr())
	}
	_ = c2.Close()

	// A malformed line closes the stream.
	a3, b3 := net.Pipe()
	go func() { _, _ = b3.Write([]byte("SSH-2.0-x\r\n")) }()
	if _, _, err := Accept(a3); !errors.Is(err, ErrMalformed) {
		t.Errorf("Accept: %v", err)
	}
	if _, err := b3.Write([]byte("x")); err == nil {
		t.Error("stream still open after a malformed line")
	}
}

// FuzzParse: no panic, nothing accepted over MaxLen, and what Parse
// accepts as TCP4/TCP6 comes out of Append the same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"PROXY UNKNOWN\r\n",
		"PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n",
		"PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n",
		"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",
		"SSH-2.0-OpenSSH_9.2\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse(%q): %v, not ErrMalformed", b, err)
			}
		} else {
			if len(b) > MaxLen {
				t.Fatalf("accepted %d bytes", len(b))
			}
			if h.Known() && h.Src.Addr().Is4() == h.Dst.Addr().Is4() && !h.Src.Addr().Is4In6() && !h.Dst.Addr().Is4In6() {
				out := h.Append(nil)
				h2, err := Parse(out)
				if err != nil || h2 != h {
					t.Fatalf("Parse(%q) = %v; Append gives %q, which parses to %v, %v", b, h, out, h2, err)
				}
			}
		}
		// Read never reads past MaxLen and agrees with Parse on a line
		// that ends in CRLF.
		r := bytes.NewReader(b)
		_, rest, err := Read(r)
		if read := len(b) - r.Len(); read > MaxLen {
			t.Fatalf("Read took %d bytes", read)
		}
		if err == nil && len(rest) > MaxLen {
			t.Fatalf("rest of %d bytes", len(rest))
		}
	})
}
