package syncfs_test

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	syncfs "github.com/hostgate/hostgate/sync"
)

// info is a FileInfo of any name, "/" too.
type info struct {
	name string
	mode fs.FileMode
}

func (i info) Name() string       { return i.name }
func (i info) Size() int64        { return 0 }
func (i info) Mode() fs.FileMode  { return i.mode }
func (i info) ModTime() time.Time { return time.Time{} }
func (i info) IsDir() bool        { return i.mode.IsDir() }
func (i info) Sys() any           { return nil }

// badNames lists every directory with entries no directory holds: "/"
// (what pkg/sftp makes of a name "/" or "///": path.Base), ".", "..",
// "a/..", "", "x/y" and "a\x00b" as directories, besides a good file
// "ok". Like the real providers, it refuses a path with a NUL byte, which
// no POSIX file name holds (an SFTP string may carry it).
type badNames struct{ hostgate.Provider }

func (badNames) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	return info{"root", fs.ModeDir | 0o755}, nil
}

func (badNames) ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	var ents []fs.DirEntry
	for _, n := range []string{"", ".", "..", "/", "a/..", "x/y", "a\x00b"} {
		ents = append(ents, fs.FileInfoToDirEntry(info{n, fs.ModeDir | 0o755}))
	}
	ents = append(ents, fs.FileInfoToDirEntry(info{"ok", 0o644}))
	return ents, nil
}

// TestHostListsNoPathOutOfItsDirectory: an entry a host lists that is
// not one name in its directory is not listed. fs.WalkDir joins each
// name to its directory's path: "/" joined to "." is ".", so a host
// listing "/" (as pkg/sftp names a "/" it is sent) as a directory kept
// WalkDir walking the root forever, each round one deeper, "x/y" is
// a path elsewhere, and "a\x00b" a name the FS lists but cannot open (the
// walk failed on it with "invalid argument").
func TestHostListsNoPathOutOfItsDirectory(t *testing.T) {
	fsys := syncfs.New(&hostgate.SyncSpec{Connect: func(ctx context.Context) (*hostgate.SyncConnection, error) {
		return &hostgate.SyncConnection{FS: badNames{}}, nil
	}}, &syncfs.Options{Timeout: 10 * time.Second})
	defer fsys.Close()
	var walked []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		walked = append(walked, p)
		if len(walked) > 20 {
			t.Fatalf("walked %q: without end", walked)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range walked {
		if !fs.ValidPath(p) {
			t.Errorf("walked %q: not an io/fs name", p)
		}
	}
	if len(walked) != 2 || walked[0] != "." || walked[1] != "ok" {
		t.Errorf("walked %q, want . and ok", walked)
	}
	ents, err := fsys.ReadDir(".")
	if err != nil || len(ents) != 1 || ents[0].Name() != "ok" {
		t.Errorf("ReadDir(.) = %v, %v; want ok alone", ents, err)
	}
}
