package shell

import (
	"bytes"
	"errors"
	"io/fs"
	"os/exec"
	"strings"
	"testing"
)

// roundTrip runs argv through /bin/sh and returns the words sh passed on,
// NUL-separated by printf.
func roundTrip(t testing.TB, argv []string) []string {
	t.Helper()
	line := "printf '%s\\0' " + Join(argv)
	out, err := exec.Command("/bin/sh", "-c", line).Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", line, err)
	}
	words := strings.Split(string(out), "\x00")
	return words[:len(words)-1]
}

func TestQuoteRoundTrip(t *testing.T) {
	cases := [][]string{
		{"plain"},
		{""},
		{"with space", "tab\there", "new\nline"},
		{"'", `"`, `\`, "$HOME", "`id`", "$(id)", "*", "?", "[a]", "~", "#x", "a;b", "a|b", "a&b", "!"},
		{"-n", "--", "-e"},
		{"\xff\xfe non-utf8", "ünïcödé"},
	}
	for _, argv := range cases {
		got := roundTrip(t, argv)
		if len(got) != len(argv) {
			t.Fatalf("argv %q: got %q", argv, got)
		}
		for i := range argv {
			if got[i] != argv[i] {
				t.Errorf("word %d: got %q want %q", i, got[i], argv[i])
			}
		}
	}
}

func TestCommandLine(t *testing.T) {
	line, err := CommandLine([]string{"sh", "-c", `printf '%s|%s|%s' "$A" "$B_2" "$(pwd)"`}, "/tmp", map[string]string{"B_2": "it's", "A": "x y"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/bin/sh", "-c", line).Output()
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	if want := "x y|it's|/tmp"; string(out) != want {
		t.Errorf("got %q want %q", out, want)
	}
	for _, bad := range []string{"", "1A", "A-B", "A B", "A=B", "ä"} {
		if _, err := CommandLine([]string{"true"}, "", map[string]string{bad: "v"}); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	if _, err := CommandLine(nil, "", nil); err == nil {
		t.Error("empty argv accepted")
	}
}

func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "a b", "'", `"\$`, "\n", "\xff", "-n"} {
		f.Add(s, "second")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		// A NUL byte can never be passed in an argv word.
		if strings.IndexByte(a, 0) >= 0 || strings.IndexByte(b, 0) >= 0 {
			t.Skip()
		}
		got := roundTrip(t, []string{a, b})
		if len(got) != 2 || !bytes.Equal([]byte(got[0]), []byte(a)) || got[1] != b {
			t.Fatalf("round trip of %q %q gave %q", a, b, got)
		}
	})
}

// A NUL byte anywhere in a command line is refused before it is sent:
// OpenSSH's sshd drops the whole connection over one.
func TestCommandLineRefusesNUL(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		dir  string
		env  map[string]string
	}{
		{"argument", []string{"echo", "a\x00b"}, "", nil},
		{"command", []string{"ec\x00ho"}, "", nil},
		{"dir", []string{"true"}, "/tmp/\x00", nil},
		{"env value", []string{"true"}, "", map[string]string{"A": "x\x00"}},
	} {
		if _, err := CommandLine(tc.argv, tc.dir, tc.env); !errors.Is(err, ErrNUL) || !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("%s: %v, want ErrNUL (an fs.ErrInvalid)", tc.name, err)
		}
	}
}
