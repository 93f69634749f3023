package providertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"syscall"
	"testing"

	"github.com/hostgate/hostgate"
)

// testWholeFile: a provider's whole-file calls (hostgate.FileReader and
// FileWriter), where it has them, give what Open, Create and their
// streams give: the same bytes, modes, errors.
func testWholeFile(t *testing.T, ctx context.Context, p hostgate.Provider, root string) {
	fr, canRead := p.(hostgate.FileReader)
	fw, canWrite := p.(hostgate.FileWriter)
	if !canRead || !canWrite {
		t.Skipf("the provider has no whole-file calls (FileReader %v, FileWriter %v)", canRead, canWrite)
	}
	answers := 0
	progress := func() { answers++ }

	// Sizes about the reads' sizes: 32 KiB (pkg/sftp's default) and 255
	// KiB (OpenSSH's largest).
	for _, size := range []int{0, 1, 100, 32<<10 - 1, 32 << 10, 32<<10 + 1, 255<<10 - 1, 255 << 10, 255<<10 + 1, 3 * 255 << 10, 1<<20 + 7} {
		name := path.Join(root, fmt.Sprintf("size-%d", size))
		data := make([]byte, size)
		_, _ = io.ReadFull(NewGenerator(byte(size)), data)
		if err := fw.WriteFile(ctx, name, 0o644, bytes.NewReader(data), progress); err != nil {
			t.Fatalf("WriteFile %d bytes: %v", size, err)
		}
		if got := readFile(t, ctx, p, name); !bytes.Equal(got, data) {
			t.Errorf("WriteFile %d bytes, Open reads %d other bytes", size, len(got))
		}
		got, err := fr.ReadFile(ctx, name, progress)
		if err != nil || !bytes.Equal(got, data) || got == nil {
			t.Errorf("ReadFile of %d bytes = %d bytes (nil %v), %v", size, len(got), got == nil, err)
		}
	}
	if answers == 0 {
		t.Errorf("no progress reported over 2 MiB each way")
	}

	// A new file gets the mode Create gives it; an existing one keeps its
	// mode and is truncated.
	for _, perm := range []fs.FileMode{0o600, 0o640, 0o644, 0o700, 0o755, 0o444} {
		viaCreate := path.Join(root, fmt.Sprintf("create-%o", perm))
		whole := path.Join(root, fmt.Sprintf("whole-%o", perm))
		writeFile(t, ctx, p, viaCreate, []byte("x"), perm)
		if err := fw.WriteFile(ctx, whole, perm, bytes.NewReader([]byte("x")), nil); err != nil {
			t.Fatalf("WriteFile %o: %v", perm, err)
		}
		a, err1 := p.Stat(ctx, viaCreate)
		b, err2 := p.Stat(ctx, whole)
		if err1 != nil || err2 != nil || a.Mode() != b.Mode() {
			t.Errorf("perm %o: Create gave %v (%v), WriteFile %v (%v)", perm, a, err1, b, err2)
		}
	}
	existing := path.Join(root, "existing")
	writeFile(t, ctx, p, existing, []byte("a longer first version"), 0o644)
	if err := p.Chmod(ctx, existing, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteFile(ctx, existing, 0o777, bytes.NewReader([]byte("short")), nil); err != nil {
		t.Fatal(err)
	}
	if fi, err := p.Stat(ctx, existing); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("WriteFile on an existing 0640 file: %v, %v", fi, err)
	}
	if got := readFile(t, ctx, p, existing); string(got) != "short" {
		t.Errorf("WriteFile on an existing file left %q", got)
	}

	// Through a dangling symlink, Create makes the target: so does
	// WriteFile.
	symlink(t, ctx, p, "target", path.Join(root, "dangling"))
	if err := fw.WriteFile(ctx, path.Join(root, "dangling"), 0o600, bytes.NewReader([]byte("through")), nil); err != nil {
		t.Errorf("WriteFile through a dangling symlink: %v", err)
	} else if got := readFile(t, ctx, p, path.Join(root, "target")); string(got) != "through" {
		t.Errorf("target of the dangling symlink holds %q", got)
	}

	// Errors, as Open and Create say them.
	dir := path.Join(root, "dir")
	mkdir(t, ctx, p, dir)
	_, err := fr.ReadFile(ctx, dir, nil)
	wantErr(t, "ReadFile of a directory", err, syscall.EISDIR)
	_, err = fr.ReadFile(ctx, path.Join(root, "missing"), nil)
	wantErr(t, "ReadFile of a missing file", err, fs.ErrNotExist)
	err = fw.WriteFile(ctx, path.Join(root, "missing", "f"), 0o644, bytes.NewReader(nil), nil)
	wantErr(t, "WriteFile in a missing directory", err, fs.ErrNotExist)
	_, cerr := p.Create(ctx, dir, 0o644)
	err = fw.WriteFile(ctx, dir, 0o644, bytes.NewReader([]byte("x")), nil)
	if err == nil || cerr == nil {
		t.Errorf("over a directory: Create %v, WriteFile %v; want both to fail", cerr, err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		t.Errorf("WriteFile error %T is no *fs.PathError", err)
	}

	// A reader that fails fails the write.
	boom := errors.New("boom")
	err = fw.WriteFile(ctx, path.Join(root, "failing"), 0o644, io.MultiReader(bytes.NewReader(make([]byte, 300<<10)), iotestErrReader{boom}), nil)
	wantErr(t, "WriteFile from a failing reader", err, boom)

	// An ended ctx fails them before they start.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := fr.ReadFile(done, path.Join(root, "size-100"), nil); err == nil {
		t.Errorf("ReadFile with an ended ctx succeeded")
	}
	if err := fw.WriteFile(done, path.Join(root, "size-100"), 0o644, bytes.NewReader(nil), nil); err == nil {
		t.Errorf("WriteFile with an ended ctx succeeded")
	}
	// The provider still works.
	if got, err := fr.ReadFile(ctx, path.Join(root, "size-100"), nil); err != nil || len(got) != 100 {
		t.Errorf("ReadFile after the cancelled calls: %d bytes, %v", len(got), err)
	}
}

type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }
