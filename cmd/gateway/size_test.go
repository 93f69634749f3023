package main

import (
	"strings"
	"testing"
)

func TestByteSizeString(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 7: "7", 1536: "1536", 1 << 10: "1K", 256 << 20: "256M", 3 << 30: "3G", 2 << 40: "2T", 1<<40 + 1<<20: "1048577M"} {
		b := byteSize(n)
		if got := b.String(); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", n, got, want)
		}
		var back byteSize
		if err := back.Set(b.String()); err != nil || back != b {
			t.Errorf("Set(%q) = %d, %v; want %d back", b.String(), back, err, n)
		}
	}
}

// FuzzByteSize: a size flag either refuses its input or reads a size no
// less than 0 that its String writes back to the same size.
func FuzzByteSize(f *testing.F) {
	for _, s := range []string{"0", "20G", "3 GiB", "7B", "1.5G", "-1", "99999999T", "", "k", "1KiBk"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b byteSize
		if err := b.Set(s); err != nil {
			if b != 0 {
				t.Fatalf("Set(%q) failed (%v) but left %d", s, err, b)
			}
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatalf("Set(%q): an empty error", s)
			}
			return
		}
		if b < 0 {
			t.Fatalf("Set(%q) = %d", s, b)
		}
		var back byteSize
		if err := back.Set(b.String()); err != nil || back != b {
			t.Fatalf("Set(%q) = %d, written %q, read back %d, %v", s, b, b.String(), back, err)
		}
	})
}
