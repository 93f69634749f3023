package dockerhost

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// roTar is a workspace tar with read-only directories, in each format a
// tar -c may write, with names too long for the ustar name field.
func roTar(t testing.TB, format tar.Format) []byte {
	t.Helper()
	long := "./" + strings.Repeat("d", 120)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "./", Typeflag: tar.TypeDir, Mode: 0o700},
		{Name: "./ro/", Typeflag: tar.TypeDir, Mode: 0o555},
		{Name: "./ro/f", Typeflag: tar.TypeReg, Mode: 0o444, Size: 5000},
		{Name: "./ro/x/", Typeflag: tar.TypeDir, Mode: 0o500},
		{Name: "./ro/link", Typeflag: tar.TypeSymlink, Linkname: "f", Mode: 0o777},
		{Name: "./open/", Typeflag: tar.TypeDir, Mode: 0o711},
		{Name: long + "/", Typeflag: tar.TypeDir, Mode: 0o1555},
		{Name: long + "/g", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1},
		{Name: "../escape/", Typeflag: tar.TypeDir, Mode: 0o555},
	} {
		h.Format = format
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write(bytes.Repeat([]byte{0o5}, int(h.Size))) // a run of 0o555 bytes: data, not a header
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDirModeReader(t *testing.T) {
	long := "./" + strings.Repeat("d", 120)
	for _, format := range []tar.Format{tar.FormatGNU, tar.FormatPAX} {
		in := roTar(t, format)
		for name, wrap := range map[string]func(io.Reader) io.Reader{
			"whole":    func(r io.Reader) io.Reader { return r },
			"one byte": iotest.OneByteReader,
			"half":     iotest.HalfReader,
		} {
			dr := newDirModeReader(wrap(bytes.NewReader(in)))
			out, err := io.ReadAll(dr)
			if err != nil || len(out) != len(in) {
				t.Fatalf("%v, %s: %d bytes of %d, %v", format, name, len(out), len(in), err)
			}
			modes := map[string]int64{}
			tr := tar.NewReader(bytes.NewReader(out))
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%v, %s: the rewritten tar does not read back: %v", format, name, err)
				}
				modes[h.Name] = h.Mode
			}
			for n, want := range map[string]int64{"./": 0o700, "./ro/": 0o755, "./ro/f": 0o444, "./ro/x/": 0o700, "./open/": 0o711, long + "/": 0o1755, "../escape/": 0o555} {
				if modes[n] != want {
					t.Errorf("%v, %s: %s has mode %o, want %o", format, name, n, modes[n], want)
				}
			}
			wantDirs := []dirMode{{"./ro", 0o555}, {"./ro/x", 0o500}, {long, 0o1555}}
			if len(dr.w.dirs) != len(wantDirs) {
				t.Fatalf("%v, %s: remembered %v, want %v", format, name, dr.w.dirs, wantDirs)
			}
			for i := range wantDirs {
				if dr.w.dirs[i] != wantDirs[i] {
					t.Errorf("%v, %s: remembered %v, want %v", format, name, dr.w.dirs, wantDirs)
				}
			}
		}
	}
}

// The source's errors come through as they are, a checksum failure in
// the middle of a header too.
func TestDirModeReaderSourceError(t *testing.T) {
	in := roTar(t, tar.FormatGNU)
	for _, cut := range []int{0, 100, 512, 700, 1536} {
		r := io.MultiReader(bytes.NewReader(in[:cut]), iotest.ErrReader(errChecksum))
		out, err := io.ReadAll(newDirModeReader(r))
		if !errors.Is(err, errChecksum) || len(out) != cut {
			t.Errorf("cut at %d: %d bytes, %v; want %d bytes, errChecksum", cut, len(out), err, cut)
		}
	}
}

func TestTarFitWriter(t *testing.T) {
	in := roTar(t, tar.FormatPAX)
	// 5000 bytes take two pages, 1 byte one.
	w := newTarFitWriter(3 * tmpfsPage)
	if _, err := io.Copy(w, iotest.OneByteReader(bytes.NewReader(in))); err != nil {
		t.Fatalf("fits: %v", err)
	}
	if w.w.need != 3*tmpfsPage {
		t.Fatalf("need %d, want %d", w.w.need, 3*tmpfsPage)
	}
	_, err := io.Copy(newTarFitWriter(3*tmpfsPage-1), bytes.NewReader(in))
	var e *errWontFit
	if !errors.As(err, &e) || e.largest != "./ro/f" || e.largestSize != 5000 {
		t.Fatalf("over: %v, want errWontFit naming ./ro/f", err)
	}
}

// FuzzDirModeReader: any input passes through at its length, whatever it
// holds, and a tar that reads back still reads back with the same
// entries.
func FuzzDirModeReader(f *testing.F) {
	f.Add(roTar(f, tar.FormatGNU))
	f.Add(roTar(f, tar.FormatPAX))
	f.Add(roTar(f, tar.FormatGNU)[:1024])
	f.Fuzz(func(t *testing.T, in []byte) {
		dr := newDirModeReader(bytes.NewReader(in))
		out, err := io.ReadAll(dr)
		if err != nil || len(out) != len(in) {
			t.Fatalf("%d bytes of %d: %v", len(out), len(in), err)
		}
		_, _ = io.Copy(newTarFitWriter(1<<40), bytes.NewReader(in))
		a, b := tar.NewReader(bytes.NewReader(in)), tar.NewReader(bytes.NewReader(out))
		for {
			ha, erra := a.Next()
			if erra != nil {
				return
			}
			hb, errb := b.Next()
			if errb != nil || ha.Name != hb.Name || ha.Size != hb.Size || ha.Typeflag != hb.Typeflag {
				t.Fatalf("entry %q became %+v (%v)", ha.Name, hb, errb)
			}
		}
	})
}
