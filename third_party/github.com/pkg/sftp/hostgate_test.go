package sftp

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hostgate: change 2 (HOSTGATE.md). Writes through one handle run one at
// a time, whatever the number of server workers; other calls pass through.
func TestHostgateSerialWrites(t *testing.T) {
	svr := &Server{openFiles: make(map[string]file)}
	ff := &concurrencyFile{}
	f, ok := svr.getHandle(svr.nextHandle(ff))
	if !ok {
		t.Fatal("handle not found")
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				if _, err := f.WriteAt([]byte{1}, int64(i*100+j)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if got := ff.most.Load(); got != 1 {
		t.Fatalf("%d writes ran at once through one handle, want 1", got)
	}
	if ff.writes.Load() != 160 {
		t.Fatalf("%d writes reached the file, want 160", ff.writes.Load())
	}
	if f.Name() != "fake" {
		t.Fatal("calls other than WriteAt do not reach the file")
	}
}

// concurrencyFile records how many WriteAt calls overlap at most.
type concurrencyFile struct {
	os.File           // not used; fills the interface
	now, most, writes atomic.Int64
}

func (f *concurrencyFile) WriteAt(b []byte, off int64) (int, error) {
	n := f.now.Add(1)
	for {
		m := f.most.Load()
		if n <= m || f.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(50 * time.Microsecond) // let other writers arrive
	f.now.Add(-1)
	f.writes.Add(1)
	return len(b), nil
}

func (f *concurrencyFile) Name() string { return "fake" }
