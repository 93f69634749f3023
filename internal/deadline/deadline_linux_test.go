//go:build linux

package deadline

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hostgate/hostgate/internal/testenv"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestExtraOwnership: only a directory of uid 0's holding "extra" moves
// the deadline, as SetTimeout makes it; one of the sandbox's uid, a
// symlink to uid 0's, a missing or a non-number "extra" do not, and an
// empty one is read again (errEmpty).
func TestExtraOwnership(t *testing.T) {
	testenv.RequirePeer(t, "root (to make directories of uid 0 and of another uid)", os.Geteuid() == 0)
	base := t.TempDir()
	root := filepath.Join(base, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(dir, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "extra"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := extra(root); err != errEmpty {
		t.Fatalf("no extra: %v, want errEmpty", err)
	}
	write(root, "")
	if _, err := extra(root); err != errEmpty {
		t.Fatalf("an empty extra: %v, want errEmpty", err)
	}
	write(root, "42\n")
	if x, err := extra(root); x != 42 || err != nil {
		t.Fatalf("extra 42: %d %v", x, err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	if _, err := extra(link); err == nil || !strings.Contains(err.Error(), "not a directory of uid 0") {
		t.Fatalf("a symlink to uid 0's directory: %v, want refused", err)
	}
	theirs := filepath.Join(base, "theirs")
	if err := os.Mkdir(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	write(theirs, "42\n")
	if err := os.Chown(theirs, 2000000001, 2000000001); err != nil {
		t.Fatal(err)
	}
	if _, err := extra(theirs); err == nil || !strings.Contains(err.Error(), "not a directory of uid 0") {
		t.Fatalf("a directory of the sandbox's uid: %v, want refused", err)
	}
	for _, bad := range []string{"x\n", "-3\n", "99999999999999999999\n"} {
		write(root, bad)
		if _, err := extra(root); err == nil || err == errEmpty {
			t.Errorf("extra %q: %v, want refused", bad, err)
		}
	}
	if _, err := extra(filepath.Join(base, "none")); err == nil {
		t.Error("no directory: want an error")
	}
}

// TestReadLine: the runtime's line, bounded; an EOF before its newline
// is not a runtime.
func TestReadLine(t *testing.T) {
	for in, want := range map[string]line{
		"12\nrest": {text: "12"},
		"":         {err: io.EOF},
		"12":       {err: io.ErrUnexpectedEOF},
	} {
		if got := readLine(strings.NewReader(in)); got != want {
			t.Errorf("readLine(%q) = %+v, want %+v", in, got, want)
		}
	}
	if got := readLine(strings.NewReader(strings.Repeat("1", 40) + "\n")); got.err == nil || !strings.Contains(got.err.Error(), "longer than 32") {
		t.Errorf("a long line: %+v, want refused", got)
	}
}
