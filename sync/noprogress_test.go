package syncfs

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"testing"
	"time"

	"github.com/hostgate/hostgate"
)

// stuckReads is a provider whose files' reads return (0, nil) until stop
// is closed: no bytes, no error, for ever.
type stuckReads struct {
	hostgate.Provider
	stop <-chan struct{}
}

func (p stuckReads) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	r, err := p.Provider.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return stuckReader{r, p.stop}, nil
}

type stuckReader struct {
	io.ReadCloser
	stop <-chan struct{}
}

var errStopped = errors.New("the test stopped the stuck reader")

func (r stuckReader) Read([]byte) (int, error) {
	select {
	case <-r.stop:
		return 0, errStopped
	default:
		return 0, nil
	}
}

// TestReadWithoutProgress: a provider's read that returns no bytes and no
// error again and again fails the read with io.ErrNoProgress, as
// io.ReadFull and bufio do. The read looped on it: the call timed out,
// its goroutine spun on after the session was given up, and FS.Close
// waited for it for ever. Each case gets ErrNoProgress, not ErrTimeout;
// stop ends a spinning read only so that a failure here does not hang.
func TestReadWithoutProgress(t *testing.T) {
	root, _ := tree(t)
	for _, tc := range []struct {
		name string
		read func(fsys *FS) error
	}{
		{"Read", func(fsys *FS) error {
			f, err := fsys.Open("hello.txt")
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.Read(make([]byte, 10))
			return err
		}},
		{"ReadFile", func(fsys *FS) error { _, err := fsys.ReadFile("hello.txt"); return err }},
		{"Seek", func(fsys *FS) error { // no Seek of its own: reopened and read up to the offset
			f, err := fsys.Open("dir/sub/b.txt")
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.(io.Seeker).Seek(50_000, io.SeekStart)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop := make(chan struct{})
			sv := newServer(t)
			sv.wrap = func(p hostgate.Provider) hostgate.Provider { return stuckReads{p, stop} }
			fsys := open(t, sv, root, 5*time.Second)
			t.Cleanup(func() { close(stop) }) // before open's Close
			err := tc.read(fsys)
			var pe *fs.PathError
			if !errors.Is(err, io.ErrNoProgress) || !errors.As(err, &pe) {
				t.Fatalf("a read that makes no progress: %v, want a *fs.PathError of io.ErrNoProgress", err)
			}
		})
	}
}
