package dockerhost

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

const (
	// tarBlock is the tar format's unit: every header is one block and
	// every entry's data is padded to whole blocks.
	tarBlock = 512
	// tmpfsPage is what a workspace's tmpfs charges a regular file's data
	// in. A file takes whole pages there, however few bytes its tar entry
	// holds; holes of a sparse file take none in the workspace, but
	// busybox tar stores them in full, so a restore writes them all.
	tmpfsPage = 4096
	// maxTarMeta bounds a GNU long name or a PAX header the walker keeps
	// to learn the next entry's name (PATH_MAX is 4096).
	maxTarMeta = 64 << 10
	// maxFixedDirBytes bounds the names of the read-only directories one
	// import remembers to make read-only again: a Go module cache of a few
	// thousand modules takes a few MiB.
	maxFixedDirBytes = 16 << 20
)

var errTooManyReadOnlyDirs = fmt.Errorf("the archive holds more than %d MiB of read-only directory names", maxFixedDirBytes>>20)

// dirMode is a directory whose mode an import relaxed, and its real mode.
type dirMode struct {
	name string // as in the archive, relative, without a trailing slash
	mode int64  // permission bits, 07777
}

// tarWalker follows a tar stream header by header, the way tar -x reads
// it (POSIX ustar, with GNU long names and PAX path and size records).
// It sizes the regular files for a tmpfs, and with fixDirs it relaxes the
// modes of directories their owner cannot write into. Whatever it does not
// recognise (a bad checksum, an unknown type) it stops following and
// passes through unchanged: tar itself is the judge of a malformed
// archive.
//
// Not archive/tar: an import must reach busybox tar byte for byte but for
// the mode and checksum of the headers it relaxes, and archive/tar only
// decodes and re-encodes (its Writer cannot write all its Reader reads:
// GNU sparse files, old formats, unknown types), exposes neither a
// header's raw bytes nor its offset, and fails where busybox tar should
// judge; tarFitWriter is an io.Writer beside the checkpoint store's, where
// archive/tar's pull Reader needs a pipe, a goroutine and a second copy of
// every byte; and it keeps up to 1 MiB of a long name or PAX header, not
// maxTarMeta.
type tarWalker struct {
	fixDirs bool

	left     int64 // data bytes, with padding, before the next header
	metaLeft int64 // of left, the bytes of a long name or PAX header
	metaType byte  // 'L' or 'x' while such data is kept, else 0
	meta     []byte
	name     string // from the last long name or PAX path: the next entry's
	paxSize  int64  // from the last PAX size, or -1
	done     bool   // end of archive, or a stream no longer followed

	need        int64 // tmpfs bytes the regular files take
	largest     string
	largestSize int64
	dirs        []dirMode
	dirBytes    int
	err         error // errTooManyReadOnlyDirs
}

func newTarWalker(fixDirs bool) *tarWalker { return &tarWalker{fixDirs: fixDirs, paxSize: -1} }

// header takes the block that comes when left is 0; with fixDirs it may
// rewrite it in place.
func (t *tarWalker) header(b []byte) {
	if t.metaType != 0 {
		t.endMeta()
	}
	if allZero(b) {
		t.done = true
		return
	}
	if !tarChecksumOK(b) {
		t.done = true
		return
	}
	size, ok := tarNumber(b[124:136])
	if !ok || size < 0 {
		t.done = true
		return
	}
	typ := b[156]
	// A long name or PAX header describes the next entry that is not one:
	// a GNU long name followed by a PAX header (of other records) still
	// names the entry after both, as busybox and GNU tar read it, and a
	// PAX size is not the size of a long name that follows it.
	switch typ {
	case 'L', 'x':
		if size > maxTarMeta {
			t.done = true
			return
		}
		t.metaType, t.metaLeft, t.meta = typ, size, t.meta[:0]
		t.left = roundUp(size, tarBlock)
		return
	case 'K', 'g':
		// A long link name, PAX global records: nothing to keep.
		t.left = roundUp(size, tarBlock)
		return
	}
	name := t.name
	if name == "" {
		name = tarString(b[0:100])
		if string(b[257:263]) == "ustar\x00" {
			if prefix := tarString(b[345:500]); prefix != "" {
				name = prefix + "/" + name
			}
		}
	}
	if t.paxSize >= 0 {
		size = t.paxSize
	}
	t.name, t.paxSize = "", -1
	if (typ == '0' || typ == 0) && strings.HasSuffix(name, "/") {
		typ = '5' // the old convention for a directory
	}
	switch typ {
	case '0', 0, '7':
		if size > t.largestSize {
			t.largest, t.largestSize = name, size
		}
		// Saturating: a header may claim up to 2^63-1 bytes (GNU
		// base-256, a PAX size), and a need that wrapped negative fit any
		// workspace.
		if p := roundUp(size, tmpfsPage); p > math.MaxInt64-t.need {
			t.need = math.MaxInt64
		} else {
			t.need += p
		}
	case '5':
		size = 0
		t.dir(b, name)
	case '1', '2', '3', '4', '6':
		size = 0 // header-only types, whatever the size field says
	default:
		t.done = true
		return
	}
	t.left = roundUp(size, tarBlock)
}

// roundUp is n (not negative) rounded up to a multiple of unit, or
// math.MaxInt64 where that would overflow.
func roundUp(n, unit int64) int64 {
	if n > math.MaxInt64-(unit-1) {
		return math.MaxInt64
	}
	return (n + unit - 1) / unit * unit
}

// dir relaxes a directory header its owner could not write into (mode
// u-w or u-x): tar run as that owner without capabilities creates the
// directory with the archive's mode and then cannot put the directory's
// entries in it.
func (t *tarWalker) dir(b []byte, name string) {
	mode, ok := tarNumber(b[100:108])
	if !ok || mode&0o300 == 0o300 {
		return
	}
	name = strings.TrimSuffix(name, "/")
	if name == "" || !safeTarName(name) {
		return // tar refuses it
	}
	// Counted when only measuring too (a checkpoint's tarFitWriter): a
	// workspace whose restore would pass the bound is refused when its
	// checkpoint is taken, not stored for every restore of it to fail.
	t.dirBytes += len(name) + 32
	if t.dirBytes > maxFixedDirBytes {
		t.err = errTooManyReadOnlyDirs
		return
	}
	if !t.fixDirs {
		return
	}
	t.dirs = append(t.dirs, dirMode{name: name, mode: mode & 0o7777})
	copy(b[100:108], fmt.Sprintf("%07o\x00", (mode|0o300)&0o7777))
	copy(b[148:156], "        ")
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", tarSum(b)))
}

// data observes data bytes of the current entry (at most left).
func (t *tarWalker) data(p []byte) {
	t.left -= int64(len(p))
	if t.metaType != 0 && t.metaLeft > 0 {
		n := min(int64(len(p)), t.metaLeft)
		t.meta = append(t.meta, p[:n]...)
		t.metaLeft -= n
	}
}

// endMeta turns a kept long name or PAX header into the next entry's name
// and size.
func (t *tarWalker) endMeta() {
	typ := t.metaType
	t.metaType = 0
	if typ == 'L' {
		t.name = tarString(t.meta)
		return
	}
	// PAX records: "%d %s=%s\n", the length counting the whole record.
	rec := t.meta
	for len(rec) > 0 {
		sp := bytes.IndexByte(rec, ' ')
		if sp <= 0 {
			return
		}
		n, err := strconv.Atoi(string(rec[:sp]))
		if err != nil || n <= sp+1 || n > len(rec) {
			return
		}
		kv := rec[sp+1 : n-1]
		rec = rec[n:]
		k, v, ok := bytes.Cut(kv, []byte("="))
		if !ok {
			continue
		}
		switch string(k) {
		case "path":
			t.name = tarString(v)
		case "size":
			if s, err := strconv.ParseInt(string(v), 10, 64); err == nil && s >= 0 {
				t.paxSize = s
			}
		}
	}
}

// safeTarName is a relative name without a ".." component and without a
// NUL: one an import may name to a command run in the workspace.
func safeTarName(name string) bool {
	if strings.HasPrefix(name, "/") || strings.ContainsRune(name, 0) {
		return false
	}
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return false
		}
	}
	return true
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// tarSum is a header's checksum: its bytes summed, the checksum field
// counted as spaces.
func tarSum(b []byte) int64 {
	var s int64
	for i, c := range b[:tarBlock] {
		if i >= 148 && i < 156 {
			c = ' '
		}
		s += int64(c)
	}
	return s
}

func tarChecksumOK(b []byte) bool {
	want, ok := tarNumber(b[148:156])
	if !ok {
		return false
	}
	if tarSum(b) == want {
		return true
	}
	// Some old writers summed signed bytes.
	var s int64
	for i, c := range b[:tarBlock] {
		if i >= 148 && i < 156 {
			c = ' '
		}
		s += int64(int8(c))
	}
	return s == want
}

// tarNumber parses a numeric header field: octal, space or NUL padded,
// or GNU base-256 (a leading 0x80) for sizes over 8 GiB.
func tarNumber(f []byte) (int64, bool) {
	if len(f) > 0 && f[0]&0x80 != 0 {
		if f[0] != 0x80 || len(f) > 9 && !allZero(f[1:len(f)-8]) {
			return 0, false // negative or over 63 bits
		}
		var v int64
		for _, c := range f[max(1, len(f)-8):] {
			v = v<<8 | int64(c)
		}
		return v, v >= 0
	}
	s := strings.Trim(string(f), " \x00")
	if s == "" {
		return 0, true
	}
	v, err := strconv.ParseInt(s, 8, 64)
	return v, err == nil
}

// tarString is a NUL-terminated field.
func tarString(f []byte) string {
	if i := bytes.IndexByte(f, 0); i >= 0 {
		f = f[:i]
	}
	return string(f)
}

// dirModeReader passes a tar stream through with the directories its
// owner cannot write into made writable (u+wx), remembering their real
// modes for afterwards. Errors of r come through unchanged (a failed
// checksum, errTarTooLarge), after the bytes read before them.
type dirModeReader struct {
	r   io.Reader
	w   *tarWalker
	hdr [tarBlock]byte
	out []byte // header bytes not yet returned
	err error  // the source's error, returned once out is empty
}

func newDirModeReader(r io.Reader) *dirModeReader {
	return &dirModeReader{r: r, w: newTarWalker(true)}
}

func (d *dirModeReader) Read(p []byte) (int, error) {
	for len(d.out) == 0 {
		switch {
		case d.err != nil:
			return 0, d.err
		case d.w.done:
			return d.r.Read(p)
		case d.w.left > 0:
			if int64(len(p)) > d.w.left {
				p = p[:d.w.left]
			}
			n, err := d.r.Read(p)
			d.w.data(p[:n])
			return n, err
		}
		// A whole header before any of it goes on: it may be rewritten.
		n, err := io.ReadFull(d.r, d.hdr[:])
		if n == tarBlock {
			d.w.header(d.hdr[:])
		}
		d.out = d.hdr[:n]
		switch {
		case d.w.err != nil:
			d.out, d.err = nil, d.w.err
		case errors.Is(err, io.ErrUnexpectedEOF):
			d.err = io.EOF
		case err != nil:
			d.err = err
		}
	}
	n := copy(p, d.out)
	d.out = d.out[n:]
	return n, nil
}

// tarFitWriter measures a tar stream written through it against the tmpfs
// a restore gets, failing with an errWontFit once its regular files need
// more than limit bytes there, and against what a restore's
// dirModeReader keeps, failing with errTooManyReadOnlyDirs.
type tarFitWriter struct {
	w     *tarWalker
	hdr   [tarBlock]byte
	nhdr  int
	limit int64
}

// errWontFit: the workspace's files, written out in full, exceed the
// workspace a restore would get.
type errWontFit struct {
	need, limit int64
	largest     string
	largestSize int64
}

func (e *errWontFit) Error() string {
	return fmt.Sprintf("the workspace's files take %d bytes written out in full, more than the %d bytes of its workspace (largest: %q, %d bytes)", e.need, e.limit, e.largest, e.largestSize)
}

func newTarFitWriter(limit int64) *tarFitWriter {
	return &tarFitWriter{w: newTarWalker(false), limit: limit}
}

func (f *tarFitWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && !f.w.done {
		if f.w.left > 0 {
			k := min(int64(len(p)), f.w.left)
			f.w.data(p[:k])
			p = p[k:]
			continue
		}
		k := copy(f.hdr[f.nhdr:], p)
		f.nhdr += k
		p = p[k:]
		if f.nhdr == tarBlock {
			f.nhdr = 0
			f.w.header(f.hdr[:])
		}
	}
	if f.w.need > f.limit {
		return 0, &errWontFit{need: f.w.need, limit: f.limit, largest: f.w.largest, largestSize: f.w.largestSize}
	}
	if f.w.err != nil {
		return 0, f.w.err
	}
	return n, nil
}
