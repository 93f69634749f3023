package syncfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hostgate/hostgate"
)

// TestLongListingDoesNotTimeOut: the timeout bounds the wait for each
// answer of a listing, as it does a ReadFile's, not the whole listing. A
// directory the host lists in more pages than fit in the timeout (pkg/sftp's
// server sends 128 names a page, OpenSSH's 100: 20 000 names take 157
// round trips, 31 s at 100 ms one way) failed with ETIMEDOUT every time,
// giving up the connection and every call on it, though every page came
// at once. 3000 names here, 24 pages of 50 ms with a timeout of 9 round
// trips (synctest's clock: whole round trips, whatever the machine's load).
func TestLongListingDoesNotTimeOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 25 * time.Millisecond
		root := t.TempDir()
		const n = 3000
		for i := range n {
			if err := os.WriteFile(filepath.Join(root, "f"+strconv.Itoa(i)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		link := &slowLink{delay: delay}
		defer link.wg.Wait()
		fsys := New(&hostgate.SyncSpec{Connect: link.connect}, &Options{Root: root, Timeout: 18 * delay})
		defer func() {
			if err := fsys.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		}()
		list, err := fsys.ReadDir(".")
		if err != nil || len(list) != n {
			t.Fatalf("ReadDir of %d names: %d, %v", n, len(list), err)
		}
		f, err := fsys.Open(".")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ents, err := f.(fs.ReadDirFile).ReadDir(-1)
		if err != nil || len(ents) != n {
			t.Fatalf("an open directory's ReadDir of %d names: %d, %v", n, len(ents), err)
		}
	})
}

// TestLongRemoveAllDoesNotTimeOut: RemoveAll of a tree bounds the wait
// for each answer by the timeout, not the whole removal: over SFTP each
// name costs round trips of its own (an lstat, a remove), so a tree of
// more names than fit in the timeout (node_modules over a WAN) failed with
// ETIMEDOUT every time while every answer came at once, giving up the
// connection and every call on it.
func TestLongRemoveAllDoesNotTimeOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 25 * time.Millisecond
		root := t.TempDir()
		for i := range 40 {
			d := filepath.Join(root, "tree", "d"+strconv.Itoa(i%4))
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, "f"+strconv.Itoa(i)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		link := &slowLink{delay: delay}
		defer link.wg.Wait()
		fsys := New(&hostgate.SyncSpec{Connect: link.connect}, &Options{Root: root, Timeout: 18 * delay})
		defer func() {
			if err := fsys.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		}()
		if err := fsys.RemoveAll("tree"); err != nil {
			t.Fatalf("RemoveAll of 44 names: %v", err)
		}
		if _, err := os.Lstat(filepath.Join(root, "tree")); !os.IsNotExist(err) {
			t.Fatalf("the tree after RemoveAll: %v", err)
		}
	})
}
