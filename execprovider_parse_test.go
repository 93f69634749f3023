package hostgate

import (
	"io/fs"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		line string
		mode fs.FileMode
		size int64
		ok   bool
	}{
		{"81a4 12 1700000000", 0o644, 12, true},
		{"41ed 4096 1700000000", fs.ModeDir | 0o755, 4096, true},
		{"a1ff 7 1700000000", fs.ModeSymlink | 0o777, 7, true},
		{"89ed 0 1", 0o755 | fs.ModeSetuid, 0, true},
		{"43ff 0 1", fs.ModeDir | fs.ModeSticky | 0o777, 0, true},
		{"11a4 0 1", fs.ModeNamedPipe | 0o644, 0, true},
		{"21b6 0 1", fs.ModeDevice | fs.ModeCharDevice | 0o666, 0, true},
		{"c1ed 0 -5", fs.ModeSocket | 0o755, 0, true},
		{"81a4 12", 0, 0, false},
		{"81a4 -1 0", 0, 0, false},
		{"zz 1 0", 0, 0, false},
		{"81a4 1 0 extra", 0, 0, false},
		{"", 0, 0, false},
		{"fffffffff 1 1", 0, 0, false},
	} {
		fi, err := parseStat([]byte(c.line), "n")
		if (err == nil) != c.ok {
			t.Errorf("%q: err %v, want ok=%v", c.line, err, c.ok)
			continue
		}
		if err != nil {
			continue
		}
		if fi.Mode() != c.mode || fi.Size() != c.size || fi.Name() != "n" {
			t.Errorf("%q: mode %v size %d, want %v %d", c.line, fi.Mode(), fi.Size(), c.mode, c.size)
		}
	}
	fi, _ := parseStat([]byte("81a4 1 1700000000"), "x")
	if !fi.ModTime().Equal(time.Unix(1700000000, 0)) {
		t.Errorf("mtime %v", fi.ModTime())
	}
}

func TestParseDirListing(t *testing.T) {
	out := []byte("./b\x00./a\nb\x00./-\x00\x0081a4 1 1\n41ed 2 2\n11a4 3 3\n")
	ents, err := parseDirListing(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-", "a\nb", "b"}
	if len(ents) != 3 {
		t.Fatalf("%d entries", len(ents))
	}
	for i, e := range ents {
		if e.Name() != want[i] {
			t.Errorf("entry %d = %q, want %q", i, e.Name(), want[i])
		}
	}
	if !ents[1].IsDir() || ents[0].Type() != fs.ModeNamedPipe {
		t.Errorf("types: %v %v", ents[1].Type(), ents[0].Type())
	}
	for _, bad := range []string{"./a\x00", "./a\x00\x00", "./a\x00./b\x00\x0081a4 1 1\n", "./a\x00\x00bogus\n"} {
		if _, err := parseDirListing([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestUnixPermRoundTrip(t *testing.T) {
	for _, m := range []fs.FileMode{0, 0o644, 0o755 | fs.ModeSetuid, 0o777 | fs.ModeSticky | fs.ModeSetgid} {
		var raw uint64
		for _, c := range unixPerm(m) {
			raw = raw*8 + uint64(c-'0')
		}
		if got := fileModeFromUnix(uint32(raw) | 0o100000); got != m {
			t.Errorf("%v -> %s -> %v", m, unixPerm(m), got)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	for _, s := range []string{"81a4 12 1700000000", "41ed 4096 0", "a1ff 7 -1", " 1 2 3 ", "x y z"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		fi, err := parseStat(line, "n")
		if err != nil {
			return
		}
		if fi.Size() < 0 {
			t.Errorf("negative size from %q", line)
		}
		_ = fi.Mode().String()
	})
}

func FuzzParseDirListing(f *testing.F) {
	f.Add([]byte("./b\x00./a\nb\x00\x0081a4 1 1\n41ed 2 2\n"))
	f.Add([]byte("\x00\x00\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		ents, err := parseDirListing(out)
		if err != nil {
			return
		}
		for i := 1; i < len(ents); i++ {
			if ents[i-1].Name() > ents[i].Name() {
				t.Errorf("not sorted: %q > %q", ents[i-1].Name(), ents[i].Name())
			}
		}
	})
}
