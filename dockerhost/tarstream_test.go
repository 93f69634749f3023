package dockerhost

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
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
	// Headers alone, of files whose size is near 2^63 (GNU base-256):
	// rounded up to whole pages, it overflowed to a negative need, which
	// fit any workspace.
	for _, size := range []int64{math.MaxInt64, math.MaxInt64 - 4000, 1 << 62} {
		var buf bytes.Buffer
		for _, name := range []string{"a", "b"} {
			// A writer each: a writer wants the data after a header.
			if err := tar.NewWriter(&buf).WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size, Format: tar.FormatGNU}); err != nil {
				f.Fatal(err)
			}
		}
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		dr := newDirModeReader(bytes.NewReader(in))
		out, err := io.ReadAll(dr)
		if err != nil || len(out) != len(in) {
			t.Fatalf("%d bytes of %d: %v", len(out), len(in), err)
		}
		// A checkpoint holding a file larger than the workspace is
		// refused, whatever size its header claims.
		const workspace = 1 << 40
		fw := newTarFitWriter(workspace)
		_, err = io.Copy(fw, bytes.NewReader(in))
		var wf *errWontFit
		if fw.w.need < 0 || fw.w.largestSize > workspace && !errors.As(err, &wf) {
			t.Fatalf("a file of %d bytes: need %d, fits a workspace of %d (%v)", fw.w.largestSize, fw.w.need, int64(workspace), err)
		}
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

// rawHeader is a ustar header block with the size field given as it is
// (octal or base-256) and a checksum summed as signed bytes if signed.
func rawHeader(name string, typ byte, mode int64, size []byte, signed bool) []byte {
	b := make([]byte, tarBlock)
	copy(b[0:100], name)
	copy(b[100:108], fmt.Sprintf("%07o\x00", mode))
	copy(b[108:116], "0000000\x00")
	copy(b[116:124], "0000000\x00")
	copy(b[124:136], size)
	copy(b[136:148], "00000000000\x00")
	b[156] = typ
	copy(b[257:263], "ustar\x00")
	copy(b[263:265], "00")
	sum := tarSum(b)
	if signed {
		sum = 0
		for i, c := range b {
			if i >= 148 && i < 156 {
				c = ' '
			}
			sum += int64(int8(c))
		}
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

func octalSize(n int64) []byte { return []byte(fmt.Sprintf("%011o\x00", n)) }

// padded is data padded to whole blocks.
func padded(data []byte) []byte {
	return append(data, make([]byte, (tarBlock-len(data)%tarBlock)%tarBlock)...)
}

// paxRecord is one "%d %s=%s\n" record.
func paxRecord(k, v string) string {
	r := " " + k + "=" + v + "\n"
	n := len(r)
	for len(strconv.Itoa(n))+len(r) != n {
		n = len(strconv.Itoa(n)) + len(r)
	}
	return strconv.Itoa(n) + r
}

// The walker reads headers as tar -x does where writers differ: a hard
// link's size field holds no data, a regular entry whose name ends in /
// is a directory, a checksum summed over signed bytes is good, a GNU long
// name stays the next entry's name across a PAX header (as busybox, GNU
// tar and archive/tar read it: the walker took the directory's truncated
// ustar name, which the import's chmod then missed), and a PAX size
// before a long name is the size of the entry after it (the walker took
// it for the long name's, and followed the rest of the stream wrong). After a header it cannot read (a bad
// checksum) it rewrites nothing more and passes the rest as it is.
func TestDirModeReaderHeaderForms(t *testing.T) {
	var in []byte
	add := func(b ...[]byte) {
		for _, x := range b {
			in = append(in, x...)
		}
	}
	add(rawHeader("./f", '0', 0o644, octalSize(0), false))
	add(rawHeader("./hard", '1', 0o644, octalSize(4*tarBlock), false)) // no data follows
	add(rawHeader("./ro1/", '5', 0o555, octalSize(0), false))
	add(rawHeader("./old/", '0', 0o500, octalSize(0), false))
	add(rawHeader("./\xe9t\xe9/", '5', 0o555, octalSize(0), true))
	long := "./" + strings.Repeat("l", 150) + "/"
	add(rawHeader("././@LongLink", 'L', 0o644, octalSize(int64(len(long)+1)), false), padded([]byte(long+"\x00")))
	pax := paxRecord("mtime", "1")
	add(rawHeader("./PaxHeaders/x", 'x', 0o644, octalSize(int64(len(pax))), false), padded([]byte(pax)))
	add(rawHeader("./"+strings.Repeat("l", 90), '5', 0o555, octalSize(0), false))
	// A PAX size is the size of the entry after the long name, not the
	// long name's.
	size := paxRecord("size", "600")
	long2 := "./" + strings.Repeat("m", 150)
	add(rawHeader("./PaxHeaders/y", 'x', 0o644, octalSize(int64(len(size))), false), padded([]byte(size)))
	add(rawHeader("././@LongLink", 'L', 0o644, octalSize(int64(len(long2)+1)), false), padded([]byte(long2+"\x00")))
	add(rawHeader("./"+strings.Repeat("m", 90), '0', 0o644, octalSize(0), false), padded(bytes.Repeat([]byte("z"), 600)))
	add(rawHeader("./ro3/", '5', 0o555, octalSize(0), false))
	bad := rawHeader("./bad/", '5', 0o555, octalSize(0), false)
	bad[148] ^= 1
	tail := len(in)
	add(bad, rawHeader("./ro2/", '5', 0o555, octalSize(0), false), make([]byte, 2*tarBlock))

	dr := newDirModeReader(iotest.HalfReader(bytes.NewReader(in)))
	out, err := io.ReadAll(dr)
	if err != nil || len(out) != len(in) {
		t.Fatalf("%d bytes of %d, %v", len(out), len(in), err)
	}
	want := []dirMode{{"./ro1", 0o555}, {"./old", 0o500}, {"./\xe9t\xe9", 0o555}, {strings.TrimSuffix(long, "/"), 0o555}, {"./ro3", 0o555}}
	if !slices.Equal(dr.w.dirs, want) {
		t.Errorf("remembered %v, want %v", dr.w.dirs, want)
	}
	if !bytes.Equal(out[tail:], in[tail:]) {
		t.Error("bytes after a header with a bad checksum were changed")
	}
	tr := tar.NewReader(bytes.NewReader(out[:tail]))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the rewritten headers do not read back: %v", err)
		}
		if h.Typeflag == tar.TypeDir && h.Mode&0o300 != 0o300 {
			t.Errorf("%q kept mode %o", h.Name, h.Mode)
		}
	}
}

// The walker's bounds: a long name or PAX header over maxTarMeta is not
// kept (the walker stops following, and passes everything on as it
// is); sizes in GNU base-256 are read, so a file of 9 GiB fails the fit
// at its header, before any of its data; more than maxFixedDirBytes of
// read-only directory names fail the import.
func TestTarWalkerBounds(t *testing.T) {
	big := paxRecord("comment", strings.Repeat("c", maxTarMeta))
	in := append(rawHeader("./PaxHeaders/x", 'x', 0o644, octalSize(int64(len(big))), false), padded([]byte(big))...)
	in = append(in, rawHeader("./ro/", '5', 0o555, octalSize(0), false)...)
	in = append(in, make([]byte, 2*tarBlock)...)
	dr := newDirModeReader(bytes.NewReader(in))
	out, err := io.ReadAll(dr)
	if err != nil || !bytes.Equal(out, in) || len(dr.w.dirs) != 0 {
		t.Fatalf("a PAX header over maxTarMeta: %v, changed %v, dirs %v; want the stream as it is", err, !bytes.Equal(out, in), dr.w.dirs)
	}

	size := make([]byte, 12)
	size[0] = 0x80
	binary.BigEndian.PutUint64(size[4:], 9<<30)
	fw := newTarFitWriter(1 << 30)
	_, err = fw.Write(rawHeader("./huge", '0', 0o644, size, false))
	var e *errWontFit
	if !errors.As(err, &e) || e.need < 9<<30 || e.largest != "./huge" {
		t.Fatalf("a 9 GiB file's header: %v, want errWontFit for ./huge", err)
	}
	size[0] = 0xff // negative: not followed
	fw = newTarFitWriter(1 << 30)
	if _, err := fw.Write(rawHeader("./neg", '0', 0o644, size, false)); err != nil || !fw.w.done {
		t.Fatalf("a negative base-256 size: %v, done %v; want the stream no longer followed", err, fw.w.done)
	}

	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		name := "./" + strings.Repeat("d", 4000)
		for i := 0; i < maxFixedDirBytes/4000+10; i++ {
			if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%s%06d/", name, i), Typeflag: tar.TypeDir, Mode: 0o555, Format: tar.FormatGNU}); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(tw.Close())
	}()
	dr = newDirModeReader(pr)
	_, err = io.Copy(io.Discard, dr)
	pr.CloseWithError(io.ErrClosedPipe) // ends the writer if the reader stopped early
	if !errors.Is(err, errTooManyReadOnlyDirs) || dr.w.dirBytes > maxFixedDirBytes+4100 {
		t.Fatalf("%d MiB of read-only directory names: %v (kept %d bytes); want errTooManyReadOnlyDirs", (maxFixedDirBytes/4000+10)*4000>>20, err, dr.w.dirBytes)
	}
}
