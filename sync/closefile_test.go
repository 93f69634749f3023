package syncfs_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
	syncfs "github.com/hostgate/hostgate/sync"
)

// heldReads is a host whose file reads get no answer until release is
// closed (or the connection goes); each reader's Close is counted.
type heldReads struct {
	hostgate.Provider // only Stat, Open and ReadDir are called
	entered, release  chan struct{}
	closes            chan struct{} // one send per reader closed
}

func (h heldReads) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	if name == "/d" {
		return info{"d", fs.ModeDir | 0o755}, nil
	}
	return info{"f", 0o644}, nil
}

func (h heldReads) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	return &heldReader{h: h, ctx: ctx}, nil
}

func (h heldReads) ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	h.entered <- struct{}{}
	select {
	case <-h.release:
		return nil, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

type heldReader struct {
	h    heldReads
	ctx  context.Context
	once sync.Once
}

func (r *heldReader) Read(b []byte) (int, error) {
	select {
	case r.h.entered <- struct{}{}:
	default: // a read after the first
	}
	select {
	case <-r.h.release:
		return copy(b, "late"), nil
	case <-r.ctx.Done():
		return 0, context.Cause(r.ctx)
	}
}

func (r *heldReader) Close() error {
	r.once.Do(func() { r.h.closes <- struct{}{} })
	return nil
}

// guard is how long a test waits for what must come at once before it
// says it did not: a bound on a hang, not a timing.
const guard = 20 * time.Second

// TestCloseEndsAReadUnderWay: closing an open file or directory whose
// Read, Seek or ReadDir waits on a host that does not answer returns at
// once, and so does that call, with fs.ErrClosed, as closing an os.File
// ends its pending reads; the file is still closed on the host once the
// read's answer comes. Close waited for the call, for as long as the
// timeout (an hour here).
func TestCloseEndsAReadUnderWay(t *testing.T) {
	for _, tc := range []struct {
		name string
		open string
		call func(f fs.File) error
	}{
		{"Read", "f", func(f fs.File) error { _, err := f.Read(make([]byte, 10)); return err }},
		{"Seek", "f", func(f fs.File) error { _, err := f.(io.Seeker).Seek(10, io.SeekStart); return err }}, // reopened and read up to 10
		{"ReadDir", "d", func(f fs.File) error { _, err := f.(fs.ReadDirFile).ReadDir(-1); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := heldReads{entered: make(chan struct{}, 1), release: make(chan struct{}), closes: make(chan struct{}, 4)}
			fsys := syncfs.New(&hostgate.SyncSpec{Connect: func(ctx context.Context) (*hostgate.SyncConnection, error) {
				return &hostgate.SyncConnection{FS: h}, nil
			}}, &syncfs.Options{Root: "/", Timeout: time.Hour})
			defer fsys.Close()
			f, err := fsys.Open(tc.open)
			if err != nil {
				t.Fatal(err)
			}
			called := make(chan error, 1)
			go func() { called <- tc.call(f) }()
			<-h.entered
			closed := make(chan error, 1)
			go func() { closed <- f.Close() }()
			closeDone, callDone := false, false
			select {
			case err := <-closed:
				closeDone = true
				if err != nil {
					t.Errorf("Close: %v", err)
				}
			case <-time.After(guard):
				t.Errorf("Close still waits %v on a read under way", guard)
			}
			select {
			case err := <-called:
				callDone = true
				if !errors.Is(err, fs.ErrClosed) {
					t.Errorf("the call under way: %v, want fs.ErrClosed", err)
				}
			case <-time.After(guard):
				t.Errorf("the call under way still waits %v after Close", guard)
			}
			close(h.release) // the host answers at last
			if tc.name != "ReadDir" {
				select {
				case <-h.closes:
				case <-time.After(guard):
					t.Errorf("the file was not closed on the host %v after its read's answer", guard)
				}
			}
			if !closeDone {
				<-closed
			}
			if !callDone {
				<-called
			}
		})
	}
}
